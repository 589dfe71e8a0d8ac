#!/usr/bin/env bash
# The tfrecorder command line on the bundled sample photos: convert -> info -> verify ->
# inspect. Run from the repository root after `pip install -e .`:
#
#     bash examples/csv_to_tfrecord.sh
#
# Writes the dataset to out/cli/ and a few of its records, as files, to out/cli-look/.
set -euo pipefail

# The command comes with the package; use the README's .venv when none is on the PATH.
command -v tfrecorder >/dev/null || PATH="$PWD/.venv/bin:$PATH"

csv=examples/images.csv   # an AutoML Vision CSV: split,image_uri,label (no header)
out=out/cli

# 1. Convert: resize every image to 224x224 (height x width), two training shards.
#    --overwrite replaces the dataset of an earlier run; without it, tfrecorder refuses.
tfrecorder convert "$csv" "$out" --image-size 224x224 --num-shards train=2 --overwrite

# 2. Describe the dataset from its manifest (dataset.json): splits, shards, labels.
tfrecorder info "$out"

# 3. Read every shard back and decode every image; exits 1 if anything is wrong.
tfrecorder verify "$out"

# 4. Write the first 3 validation records as files you can open: images + records.csv.
look=$(tfrecorder inspect "$out" --split validation --num-records 3 --output-dir out/cli-look)
ls "$look"
