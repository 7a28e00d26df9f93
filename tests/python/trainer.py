#!/usr/bin/env python3
"""trainer.py — the PyTorch trainer the Python tests run under `geotrain launch -- CMD`: a small
MLP regression on synthetic data (each site its own stream), wrapped in geotrain.DiLoCo exactly
as the package documents. Everything about the run comes from the environment launch sets.

    --extra-param-site NAME   that site's model has one parameter more (an error at start)
    --config/--site           passed to DiLoCo instead of the environment
    --save-every N            diloco.save() after every N-th round it applies (a resume,
                              under `launch --resume`, comes from GT_RESUME)

Exit status: 0 done, 3 a geotrain.GeotrainError (its message on stderr, prefixed
"GeotrainError:"), 4 stopped (geotrain.Stopped).
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

import geotrain


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--extra-param-site")
    ap.add_argument("--config")
    ap.add_argument("--site")
    ap.add_argument("--save-every", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    site = args.site or os.environ.get("GT_SITE", "")
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
    if args.extra_param_site and site == args.extra_param_site:
        model.register_parameter("extra", nn.Parameter(torch.zeros(1)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    w_true = torch.linspace(-1, 1, 16)
    try:
        with geotrain.DiLoCo(model, opt, config=args.config, site=args.site) as diloco:
            first = None
            while not diloco.done:  # (with outer.catch_up a round may end early)
                step = diloco.step_count
                g = torch.Generator().manual_seed(7919 * diloco.site_index + step)
                x = torch.randn(32, 16, generator=g)
                y = torch.tanh(0.3 * (x @ w_true)).unsqueeze(1)
                loss = nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                diloco.step(tokens=x.shape[0], loss=loss.item())
                if args.save_every and diloco.applied and \
                        diloco.rounds_applied % args.save_every == 0 and \
                        diloco.step_count < diloco.first_step + diloco.total_steps:
                    diloco.save()
                first = loss.item() if first is None else first
            s = diloco.summary()
            st = diloco.status()
            print("trainer: site %s steps %d round %d rounds_applied %d first_loss %s "
                  "state %s hash_checks %d resumed_step %d" %
                  (site, st["step"], diloco.round, s["rounds_applied"], first, st["state"],
                   s["hash_checks"], diloco.resumed_step), flush=True)
    except geotrain.Stopped as e:
        print("Stopped: %s" % e, file=sys.stderr, flush=True)
        return 4
    except geotrain.GeotrainError as e:
        print("GeotrainError: %s" % e, file=sys.stderr, flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
