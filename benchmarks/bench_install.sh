#!/usr/bin/env bash
# The base install (no extra) of two commits side by side: its size, its packages, and how
# long `import tfrecorder` and `tfrecorder info` take in it. Written for issue 51, which
# made TensorFlow the `tf` extra: BEFORE is a commit where it was a dependency (3e09d03).
#
#     benchmarks/bench_install.sh BEFORE [AFTER [WORK_DIR]]
#
# Each commit is exported with `git archive` (the checkout stays as it is) and installed
# with uv, with its own constraints.txt, into WORK_DIR/<name>-venv (default: a new
# temporary folder). `info` reads a dataset AFTER converts from the bundled sample photos.
# Timings: 3 rounds, each running both commits' commands in turn (this shared host's speed
# drifts within minutes); each line is one run's wall and CPU (user + sys) seconds. Needs
# uv, and PyPI or uv's cache: TensorFlow's wheel is 600 MB.
set -euo pipefail
before=$1 after=${2:-HEAD} work=${3:-$(mktemp -d)}
repo=$(cd "$(dirname "$0")/.." && pwd)
uv=${UV:-uv}

for name in before after; do
    commit=${!name}
    mkdir -p "$work/$name-src"
    git -C "$repo" archive "$commit" | tar -x -C "$work/$name-src"
    "$uv" venv -q -p 3.11 "$work/$name-venv"
    "$uv" pip install -q --python "$work/$name-venv/bin/python" \
        -c "$work/$name-src/constraints.txt" -e "$work/$name-src"
    site=$("$work/$name-venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    packages=$("$uv" pip list --python "$work/$name-venv/bin/python" 2>/dev/null | tail -n +3 | wc -l)
    echo "$name ($commit): site-packages $(du -sh "$site" | cut -f1), $packages packages"
    "$work/$name-venv/bin/python" -c "import tfrecorder"  # writes the bytecode, untimed
done

dataset=$work/dataset
"$work/after-venv/bin/python" -m tfrecorder convert "$work/after-src/examples/images.csv" \
    "$dataset" --no-progress >/dev/null
echo "run wall_s cpu_s"
for round in 1 2 3; do
    for name in before after; do
        python=$work/$name-venv/bin/python
        /usr/bin/time -f "$name import %e %U %S" "$python" -c "import tfrecorder" 2>&1 \
            >/dev/null | tail -1 | awk '{print $1, $2, $3, $4 + $5}'
        /usr/bin/time -f "$name info %e %U %S" "$python" -m tfrecorder info "$dataset" 2>&1 \
            >/dev/null | tail -1 | awk '{print $1, $2, $3, $4 + $5}'
    done
done
