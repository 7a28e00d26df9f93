"""geotrain — train one model across several datacenters with DiLoCo, from PyTorch.

    import torch, geotrain
    model = MyModel(); opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with geotrain.DiLoCo(model, opt) as diloco:     # config and site from GT_CONFIG / GT_SITE,
        while not diloco.done:                      # or DiLoCo(model, opt, config=..., site=...)
            loss = loss_fn(model(x), y); loss.backward(); opt.step(); opt.zero_grad()
            diloco.step(tokens=x.numel(), loss=loss.item())

The model may be on any device, in any floating dtype; a site of several ranks is a
torch.distributed job (init_process_group on every rank first; DDP replicas, or
shard=(offset, total)). Run it on every site of a sites.yaml with
`geotrain launch sites.yaml -- python3 train.py` (a site of R ranks: CMD started R times with
torchrun's variables).
The package is a thin ctypes layer over libgeotrain.so (the C API in diloco/gt_diloco.h); see
docs/api.md.
"""
from .diloco import DiLoCo, GeotrainError, Stopped

__all__ = ["DiLoCo", "GeotrainError", "Stopped"]
__version__ = "0.1.0"
