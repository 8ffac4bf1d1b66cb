"""Dumps a few reference cases of an example model to .npz for test clients that have no torch.

Run by the python that exported the models (Debian's python3 with python3-torch; CMake's SLUICE_PYTHON):
    dump_reference.py MODEL_DIR OUT.npz [--max-length N]
reads MODEL_DIR/reference.pt (TorchScript module whose buffers are case{k}_input{j}, case{k}_output{j},
case_count: each case's unpadded input and the eager model's output on it alone) and writes input{k} and
output{k} (first input and first output of case k) for every case no longer than --max-length.
"""
import argparse
import os

import numpy as np
import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("out")
    parser.add_argument("--max-length", type=int, default=1 << 62)
    args = parser.parse_args()
    module = torch.jit.load(os.path.join(args.model_dir, "reference.pt"))
    buffers = dict(module.named_buffers())
    arrays = {}
    kept = 0
    for k in range(int(buffers["case_count"])):
        x = buffers[f"case{k}_input0"]
        if x.shape[0] > args.max_length:
            continue
        arrays[f"input{kept}"] = x.numpy()
        arrays[f"output{kept}"] = buffers[f"case{k}_output0"].numpy()
        kept += 1
    if kept == 0:
        raise SystemExit(f"{args.model_dir}: no reference case of length <= {args.max_length}")
    np.savez(args.out, **arrays)
    print(f"dump_reference: {kept} case(s) of {os.path.basename(os.path.normpath(args.model_dir))} -> {args.out}")


if __name__ == "__main__":
    main()
