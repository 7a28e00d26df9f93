"""geotrain — train one model across several datacenters with DiLoCo, from PyTorch.

    import torch, geotrain
    model = MyModel(); opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with geotrain.DiLoCo(model, opt) as diloco:     # config and site from GT_CONFIG / GT_SITE,
        for step in range(diloco.total_steps):      # or DiLoCo(model, opt, config=..., site=...)
            loss = loss_fn(model(x), y); loss.backward(); opt.step(); opt.zero_grad()
            diloco.step(tokens=x.numel(), loss=loss.item())

Run it on every site of a sites.yaml with `geotrain launch sites.yaml -- python3 train.py`.
The package is a thin ctypes layer over libgeotrain.so (the C API in diloco/gt_diloco.h); see
docs/api.md.
"""
from .diloco import DiLoCo, GeotrainError, Stopped

__all__ = ["DiLoCo", "GeotrainError", "Stopped"]
__version__ = "0.1.0"
