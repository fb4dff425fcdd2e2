"""Lesson 07's benchmark, the PyTorch side: torch.optim.AdamW(fused=True) on
the CPU, timed one step at a time on request, so that bench/bench_07.c can
interleave its repetitions with its own variants.

It reads one command a line on standard input and answers one line:
    size N          fp32 parameters, gradients and a preallocated bf16 copy
                    of N elements, the optimizer's state made by one untimed
                    step; answers "ok"
    adamw T         two optimizer steps back to back on T threads; answers
                    the second's seconds
    adamw_bf16 T    the same, each step followed by the bf16 copy of the
                    parameters (p.to(torch.bfloat16), into the
                    preallocated tensor), as a mixed-precision trainer
                    needs them
    quit
Its first line says "ready TORCH-VERSION", or, where PyTorch cannot be
imported, "skipped: ..." and it ends. Nothing here checks numbers: PyTorch's
AdamW applies the weight decay in another order than common/optimizer.c, so
only its speed is compared."""
import sys
import time
import warnings


def main():
    # PyTorch warns when NumPy is missing; nothing here needs NumPy.
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    try:
        import torch
    except ImportError:
        print("skipped: PyTorch is not installed (pip install torch in a "
              "virtual environment)", flush=True)
        return
    print("ready", torch.__version__, flush=True)
    params = grads = copy = optimizer = None
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        if words[0] == "size":
            n = int(words[1])
            params = grads = copy = optimizer = None
            generator = torch.Generator().manual_seed(7)
            params = torch.nn.Parameter(torch.randn(n, generator=generator))
            # Gradients away from zero: no subnormal squares, which cost
            # microcode assists on x86 and would time something else.
            grads = torch.rand(n, generator=generator) + 0.001
            params.grad = grads
            copy = torch.empty(n, dtype=torch.bfloat16)
            optimizer = torch.optim.AdamW([params], lr=1e-3,
                                          betas=(0.9, 0.999), eps=1e-8,
                                          weight_decay=0.01, fused=True)
            optimizer.step()        # makes exp_avg and exp_avg_sq
            copy.copy_(params.detach())
            print("ok", flush=True)
            continue
        threads = int(words[1])
        if threads != torch.get_num_threads():
            # A new team size: its threads are started by an untimed step.
            torch.set_num_threads(threads)
            optimizer.step()
        # Two steps back to back, the second timed: the first wakes the
        # threads after bench_07's pause, as bench_07 does for its own.
        for _ in range(2):
            start = time.perf_counter()
            optimizer.step()
            if words[0] == "adamw_bf16":
                with torch.no_grad():
                    copy.copy_(params)
            seconds = time.perf_counter() - start
        print(repr(seconds), flush=True)


if __name__ == "__main__":
    main()
