"""Loaded by every Python process of `bench_beam.py --no-images --engines external`'s
worker pool (this folder is first on their PYTHONPATH, and `TFRECORDER_FINISH_PROBE`
names a file): wraps the Beam pipeline's finish step (`beam_files._finish_in_job`) to
record the memory it takes itself, which the peak of its worker process (which also
encoded shards) cannot tell apart; and the step that writes a shard of a table without
images (`beam._WriteShard._write_encoded`), to tell what it holds from what Beam's
harness holds around it.

- `rss_growth_mb`: the process's peak RSS during the step above its RSS when the step
  began (the peak is reset first: `echo 5 > /proc/self/clear_refs`);
- `python_peak_mb`: the step's peak of Python allocations (tracemalloc; NumPy's and
  pandas' buffers included).

A job's functions are pickled by reference to their module, so the job's workers
unpickle this wrapper in place of the step."""

import os

if os.environ.get("TFRECORDER_FINISH_PROBE"):
    import functools
    import json
    import time
    import tracemalloc

    from tfrecorder.write.engines import beam_files

    def _kb(field: str) -> int:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith(field))

    def _probed(step):
        @functools.wraps(step)
        def run(results, *args, **kwargs):
            with open("/proc/self/clear_refs", "w") as refs:
                refs.write("5")
            before, start = _kb("VmRSS:"), time.perf_counter()
            tracemalloc.start()
            try:
                return step(results, *args, **kwargs)
            finally:
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                with open(os.environ["TFRECORDER_FINISH_PROBE"], "w") as out:
                    json.dump({"rss_before_mb": before / 1024,
                               "rss_growth_mb": (_kb("VmHWM:") - before) / 1024,
                               "python_peak_mb": peak / 2**20, "shards": len(results),
                               "seconds": time.perf_counter() - start}, out)
        return run

    beam_files._finish_in_job = _probed(beam_files._finish_in_job)

    from tfrecorder.write.engines import beam

    def _writes_probed(write):
        """`_WriteShard._write_encoded`: its own peak of Python allocations and the
        shard's records in bytes, a JSON line a shard (`<probe>.writes`)."""
        @functools.wraps(write)
        def run(self, batches, *args):
            tracemalloc.start()
            try:
                return write(self, batches, *args)
            finally:
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                held = sum(batch.examples.nbytes for batch in batches)
                with open(os.environ["TFRECORDER_FINISH_PROBE"] + ".writes", "a") as out:
                    out.write(json.dumps({"records_mb": held / 2**20,
                                          "python_peak_mb": peak / 2**20}) + "\n")
        return run

    beam._WriteShard._write_encoded = _writes_probed(beam._WriteShard._write_encoded)
