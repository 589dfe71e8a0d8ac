"""Video and audio sources (issue 49): the roles `video_uri` and `audio_uri` in tables,
Vertex AI's video import files (JSONL and CSV, its three objectives), DMVR's clips CSV,
and folders of clips, each read into the table of clips `media.clip_table` makes.

Inputs are written as the tools write them; the media files are empty placeholders (no
source opens them: decoding is the worker's).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tfrecorder.errors import SchemaError
from tfrecorder.sources import load_table
from tfrecorder.sources.media import seconds
from tfrecorder.sources.table import CLIP_END, CLIP_START, REGIONS, SEGMENTS

NA = None


def spans(table) -> list[tuple]:
    """Each row's (start, end) in microseconds, None for <NA>."""
    return [(None if pd.isna(s) else int(s), None if pd.isna(e) else int(e))
            for s, e in zip(table.rows[CLIP_START], table.rows[CLIP_END])]


def write_jsonl(path, lines: list[dict]) -> str:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


# --- times -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("1.5", 1.5), ("1.5s", 1.5), ("4.000000s", 4.0), (" 12.90 ", 12.9), (3, 3.0),
    ("inf", float("inf")), ("Infinity", float("inf")), ("INF", float("inf"))])
def test_times_are_read_as_the_tools_write_them(text, expected):
    assert seconds(text) == expected


@pytest.mark.parametrize("text", ["1.5x", "", "-1", "nan", "s", "-inf", True, None])
def test_what_is_no_time_is_refused(text):
    with pytest.raises(ValueError, match="a time is seconds"):
        seconds(text)


# --- tables with video_uri / audio_uri -----------------------------------------------------

def test_a_dataframe_of_videos_is_a_table_of_clips(tmp_path):
    frame = pd.DataFrame({"split": ["train", "test", "validation"],
                          "video_uri": ["a.mp4", "b.mp4", "c.webm"],
                          "label": ["run", "jump", "run"],
                          "start": [0.5, None, 2], "end": ["2.5s", "inf", 3.25]})
    table = load_table(frame)
    assert (table.media, table.task, table.multi_label) == ("video", "classification", False)
    assert table.rows["image_uri"].tolist() == ["a.mp4", "b.mp4", "c.webm"]
    assert table.rows["split"].tolist() == ["train", "test", "validation"]
    assert table.rows["label"].tolist() == ["run", "jump", "run"]
    assert spans(table) == [(500_000, 2_500_000), (None, None), (2_000_000, 3_250_000)]
    assert str(table.rows[CLIP_START].dtype) == "Int64"
    assert table.inputs == ()  # start and end are the clip, not features


def test_an_audio_csv_names_its_start_and_end_as_start_time_and_end_time(tmp_path):
    (tmp_path / "audio.csv").write_text(
        "audio_uri,label,start_time,end_time\ndog.wav,bark,0,1.5\ncat.flac,meow,,\n")
    table = load_table(str(tmp_path / "audio.csv"))
    assert (table.media, table.task) == ("audio", "classification")
    assert table.rows["uri"].tolist() == [str(tmp_path / "dog.wav"),
                                          str(tmp_path / "cat.flac")]
    assert table.rows["label"].tolist() == ["bark", "meow"]
    assert spans(table) == [(0, 1_500_000), (None, None)]
    assert table.rows.index.tolist() == [2, 3]  # lines


def test_a_parquet_file_of_audio_clips(tmp_path):
    pd.DataFrame({"Audio URI": ["a.mp3", "b.ogg"], "label": ["x", "y"],
                  "end": [1.0, 2.0], "speaker": ["ann", "bob"]}).to_parquet(
        tmp_path / "t.parquet")
    table = load_table(str(tmp_path / "t.parquet"))
    assert table.media == "audio"
    assert spans(table) == [(None, 1_000_000), (None, 2_000_000)]
    assert [c.name for c in table.inputs] == ["speaker"]


def test_an_image_table_keeps_its_start_column_as_an_input():
    table = load_table(pd.DataFrame({"image_uri": ["a.jpg"], "start": [1.0]}))
    assert table.media == "image" and [c.name for c in table.inputs] == ["start"]
    assert CLIP_START not in table.rows


def test_image_and_video_columns_in_one_table_are_refused_naming_both():
    frame = pd.DataFrame({"image_uri": ["a.jpg"], "video_uri": ["a.mp4"], "label": ["x"]})
    with pytest.raises(SchemaError, match=r"ImageUri and VideoUri columns: "
                                          r"\['image_uri', 'video_uri'\]"):
        load_table(frame)


def test_a_column_of_video_paths_under_another_name_is_asked_about():
    frame = pd.DataFrame({"path": ["a.mp4", "b.mov"], "label": ["x", "y"]})
    with pytest.raises(SchemaError, match=r"no 'video_uri' column, and column 'path' looks "
                                          r"like video paths.*schema=\{'path': 'VideoUri'\}"):
        load_table(frame)
    assert load_table(frame, schema={"path": "VideoUri"}).media == "video"


def test_a_time_that_is_not_one_is_named_with_its_column_row_and_value(tmp_path):
    (tmp_path / "t.csv").write_text("video_uri,label,start,end\n"
                                    + "".join(f"v{i}.mp4,x,0,1\n" for i in range(5))
                                    + "v5.mp4,x,1.5x,2\n")
    with pytest.raises(SchemaError, match=r"column 'start' has '1.5x' at line 7, which is "
                                          r"not a time") as caught:
        load_table(str(tmp_path / "t.csv"))
    assert caught.value.rows == [7] and caught.value.column == "start"


def test_an_end_before_its_start_is_refused():
    frame = pd.DataFrame({"video_uri": ["a.mp4", "b.mp4"], "start": [1.0, 5.0],
                          "end": [2.0, 4.0]})
    with pytest.raises(SchemaError, match=r"ends at or before its start at row 1 "
                                          r"\(e.g. 5.0 to 4.0\)"):
        load_table(frame)


# --- Vertex AI video JSONL ----------------------------------------------------------------

ML_USE = "aiplatform.googleapis.com/ml_use"


def test_vertex_classification_jsonl_gives_a_row_a_segment(tmp_path):
    path = write_jsonl(tmp_path / "video.jsonl", [
        {"videoGcsUri": "gs://demo/video1.mp4", "timeSegmentAnnotations": [
            {"displayName": "cartwheel", "startTime": "1.0s", "endTime": "12.0s"},
            {"displayName": "swing", "startTime": "13.5s", "endTime": "inf"}],
         "dataItemResourceLabels": {ML_USE: "training"}},
        {"videoGcsUri": "gs://demo/video2.mp4",
         "dataItemResourceLabels": {ML_USE: "test"}}])
    table = load_table(path)
    assert (table.media, table.task, table.multi_label) == ("video", "classification", False)
    assert table.rows.index.tolist() == ["1:1", "1:2", "2"]
    assert table.rows["image_uri"].tolist() == ["gs://demo/video1.mp4"] * 2 + [
        "gs://demo/video2.mp4"]
    assert table.rows["split"].tolist() == ["train", "train", "test"]
    assert table.rows["label"].tolist() == ["cartwheel", "swing", None]
    assert spans(table) == [(1_000_000, 12_000_000), (13_500_000, None), (None, None)]


def test_vertex_action_recognition_jsonl_keeps_segments_and_key_frames(tmp_path):
    path = write_jsonl(tmp_path / "actions.jsonl", [
        {"videoGcsUri": "gs://demo/video1.mp4",
         "timeSegments": [{"startTime": "0s", "endTime": "20s"},
                          {"startTime": "30s", "endTime": "40s"}],
         "timeSegmentAnnotations": [
             {"displayName": "cartwheel", "startTime": "1.0s", "endTime": "12.0s"},
             {"displayName": "jump", "startTime": "35s", "endTime": "35s"},
             {"displayName": "jump", "startTime": "15s", "endTime": "15.5s"}],
         "dataItemResourceLabels": {"ml_use": "training"}},
        {"videoGcsUri": "gs://demo/video2.mp4", "timeSegmentAnnotations": [
            {"displayName": "swing", "startTime": "4.0s", "endTime": "4.0s"}],
         "dataItemResourceLabels": {"ml_use": "test"}}])
    table = load_table(path)
    assert (table.task, table.multi_label) == ("action_recognition", True)
    assert table.rows.index.tolist() == ["1:1", "1:2", "2"]
    assert table.rows["split"].tolist() == ["train", "train", "test"]
    assert table.rows["label"].tolist() == [["cartwheel", "jump"], ["jump"], ["swing"]]
    assert table.rows[SEGMENTS].tolist() == [
        [(1_000_000, 12_000_000), (15_000_000, 15_500_000)], [(35_000_000, 35_000_000)],
        [(4_000_000, 4_000_000)]]
    assert spans(table) == [(0, 20_000_000), (30_000_000, 40_000_000), (None, None)]


def test_an_action_outside_every_fully_annotated_segment_is_named(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [
        {"videoGcsUri": "gs://v.mp4", "timeSegments": [{"startTime": "0s", "endTime": "5s"}],
         "timeSegmentAnnotations": [{"displayName": "jump", "startTime": "7s",
                                     "endTime": "7s"}]}])
    with pytest.raises(SchemaError, match=r"line 1 of the JSONL file .* has the action "
                                          r"'jump' at 7-7 s, outside"):
        load_table(path)


@pytest.mark.parametrize("spelling", ["camel", "snake"])
def test_vertex_object_tracking_jsonl_in_both_spellings(tmp_path, spelling):
    def box(name, t, instance, x0, y0, x1, y1):
        if spelling == "camel":
            return {"displayName": name, "timeOffset": t, "instanceId": instance,
                    "xMin": x0, "yMin": y0, "xMax": x1, "yMax": y1}
        return {"displayName": name, "time_offset": t, "instance_id": instance,
                "x_min": x0, "y_min": y0, "x_max": x1, "y_max": y1}

    key = {"camel": "temporalBoundingBoxAnnotations",
           "snake": "temporal_bounding_box_annotations"}[spelling]
    path = write_jsonl(tmp_path / "tracks.jsonl", [
        {"videoGcsUri": "gs://demo-data/video1.mp4", key: [
            box("horse", "4.000000s", "-1", "0.668912", "0.560642", "1.000000", "1.000000"),
            box("horse", "4.5s", 7, 0.1, 0.2, 0.3, 0.4)],
         "dataItemResourceLabels": {ML_USE: "training"}},
        {"videoGcsUri": "gs://demo-data/video2.mp4", key: [
            box("rider", "71.000000s", "3", "0.679056", "0.070957", "0.801716", "0.290358")],
         "dataItemResourceLabels": {ML_USE: "test"}}])
    table = load_table(path)
    assert (table.media, table.task, table.multi_label) == ("video", "object_tracking", True)
    assert table.rows["split"].tolist() == ["train", "test"]
    assert table.rows["label"].tolist() == [["horse", "horse"], ["rider"]]
    assert table.rows[REGIONS].tolist() == [
        [(4_000_000, 0.560642, 0.668912, 1.0, 1.0, -1), (4_500_000, 0.2, 0.1, 0.4, 0.3, 7)],
        [(71_000_000, 0.070957, 0.679056, 0.290358, 0.801716, 3)]]
    assert spans(table) == [(None, None), (None, None)]
    assert table.skipped_annotations is None


def test_a_box_outside_the_frame_is_skipped_and_listed_or_refused(tmp_path):
    path = write_jsonl(tmp_path / "tracks.jsonl", [
        {"videoGcsUri": "gs://v.mp4", "temporalBoundingBoxAnnotations": [
            {"displayName": "car", "timeOffset": "1s", "xMin": 0.1, "yMin": 0.1,
             "xMax": 0.5, "yMax": 0.5},
            {"displayName": "car", "timeOffset": "2s", "xMin": 0.2, "yMin": 0.5,
             "xMax": 1.5, "yMax": 0.9}]}])
    table = load_table(path)
    assert table.rows[REGIONS].tolist() == [[(1_000_000, 0.1, 0.1, 0.5, 0.5, -1)]]
    assert table.rows["label"].tolist() == [["car"]]
    skipped = table.skipped_annotations
    assert skipped[["annotation", "image", "reason"]].values.tolist() == [
        ["line 1, box 1", 1, "box outside the image"]]
    with pytest.raises(SchemaError, match=r"1 object outside the image: line 1, box 1"):
        load_table(path, invalid_annotations="error")


def test_a_tracking_box_without_its_time_is_named(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [{"videoGcsUri": "gs://v.mp4",
        "temporalBoundingBoxAnnotations": [{"displayName": "car", "xMin": 0.1, "yMin": 0.1,
                                            "xMax": 0.5, "yMax": 0.5}]}])
    with pytest.raises(SchemaError, match=r"line 1 of the JSONL file .* \(box 0\) has no "
                                          r"timeOffset"):
        load_table(path)


def test_an_unknown_objective_is_named_with_its_line(tmp_path):
    path = write_jsonl(tmp_path / "v.jsonl", [
        {"videoGcsUri": "gs://v.mp4"},
        {"videoGcsUri": "gs://w.mp4", "textSegmentAnnotations": [{"displayName": "x"}]}])
    with pytest.raises(SchemaError, match=r"line 2 of the JSONL file .* has "
                                          r"'textSegmentAnnotations', an annotation of no "
                                          r"Vertex AI video objective") as caught:
        load_table(path)
    assert caught.value.rows == [2]


def test_a_file_of_two_objectives_is_refused(tmp_path):
    path = write_jsonl(tmp_path / "v.jsonl", [
        {"videoGcsUri": "gs://v.mp4", "timeSegmentAnnotations": [
            {"displayName": "x", "startTime": "0s", "endTime": "1s"}]},
        {"videoGcsUri": "gs://w.mp4", "temporalBoundingBoxAnnotations": [
            {"displayName": "car", "timeOffset": "1s", "xMin": 0.1, "yMin": 0.1,
             "xMax": 0.5, "yMax": 0.5}]}])
    with pytest.raises(SchemaError, match=r"two objectives: classification \(line 1\) and "
                                          r"object tracking \(line 2\)"):
        load_table(path)


def test_an_unreadable_time_in_jsonl_names_its_line_and_value(tmp_path):
    path = write_jsonl(tmp_path / "v.jsonl", [
        {"videoGcsUri": "gs://v.mp4", "timeSegmentAnnotations": [
            {"displayName": "x", "startTime": "1.5x", "endTime": "3s"}]}])
    with pytest.raises(SchemaError, match=r"line 1 of the JSONL file .* has the startTime "
                                          r"'1.5x', which is not a time"):
        load_table(path)


def test_an_image_jsonl_is_still_read_as_images(tmp_path):
    path = write_jsonl(tmp_path / "images.jsonl", [
        {"imageGcsUri": "gs://b/a.jpg", "classificationAnnotation": {"displayName": "x"}}])
    table = load_table(path)
    assert (table.media, table.task) == ("image", "classification")


# --- Vertex AI video CSV ------------------------------------------------------------------

def test_vertex_classification_csv_with_and_without_ml_use(tmp_path):
    (tmp_path / "with.csv").write_text(
        "training,gs://b/v1.mp4,cartwheel,0,inf\ntest,gs://b/v1.mp4,swing,2.5,9\n"
        "validation,gs://b/v2.mp4,,,\n")
    (tmp_path / "without.csv").write_text("gs://b/v1.mp4,cartwheel,0.0,inf\n"
                                          "gs://b/v2.avi,swing,1,2.000001\n")
    table = load_table(str(tmp_path / "with.csv"))
    assert (table.media, table.task) == ("video", "classification")
    assert table.rows["split"].tolist() == ["train", "test", "validation"]
    assert table.rows["label"].tolist() == ["cartwheel", "swing", None]
    assert spans(table) == [(0, None), (2_500_000, 9_000_000), (None, None)]
    table = load_table(str(tmp_path / "without.csv"))
    assert table.rows["split"].tolist() == ["unassigned"] * 2
    assert spans(table) == [(0, None), (1_000_000, 2_000_001)]
    assert table.rows.index.tolist() == [1, 2]


def test_vertex_csv_errors_name_the_file_line_and_value(tmp_path):
    lines = [f"gs://b/v{i}.mp4,run,0,1\n" for i in range(6)]
    (tmp_path / "bad.csv").write_text("".join(lines) + "gs://b/v7.mp4,run,1.5x,3\n")
    with pytest.raises(SchemaError, match=r"line 7 of the CSV file '.*bad.csv' has the "
                                          r"TIME_SEGMENT_START '1.5x', which is not a time"):
        load_table(str(tmp_path / "bad.csv"))
    (tmp_path / "back.csv").write_text("gs://b/v1.mp4,run,5,4\n")
    with pytest.raises(SchemaError, match=r"line 1 of the CSV file '.*back.csv' has a "
                                          r"segment that ends at 4 s, before it starts"):
        load_table(str(tmp_path / "back.csv"))


def test_vertex_action_recognition_csv_groups_a_segments_lines(tmp_path):
    (tmp_path / "ar.csv").write_text(
        "VIDEO_URI,TIME_SEGMENT_START,TIME_SEGMENT_END,LABEL,ANNOTATION_FRAME_TIMESTAMP\n"
        "gs://b/v1.mp4,0,60,swing,40.5\n"
        "gs://b/v2.mp4,0,inf,jump,3\n"
        "gs://b/v1.mp4,0,60,jump,41,44\n")
    table = load_table(str(tmp_path / "ar.csv"))
    assert (table.task, table.multi_label) == ("action_recognition", True)
    assert table.rows.index.tolist() == [2, 3]
    assert table.rows["label"].tolist() == [["swing", "jump"], ["jump"]]
    assert table.rows[SEGMENTS].tolist() == [
        [(40_500_000, 40_500_000), (41_000_000, 44_000_000)], [(3_000_000, 3_000_000)]]
    assert spans(table) == [(0, 60_000_000), (0, None)]


def test_vertex_object_tracking_csv_merges_a_videos_lines(tmp_path):
    (tmp_path / "ot.csv").write_text(
        "TRAIN,gs://b/v1.avi,car,,12.90,0.8,0.2,,,0.9,0.3,,\n"
        "TRAIN,gs://b/v1.avi,car,1,12.10,0.8,0.8,0.9,0.8,0.9,0.9,0.8,0.9\n"
        "TEST,gs://b/v2.avi,,,,,,,,,,\n"
        "TRAIN,gs://b/v1.avi,bike,2,12.50,.45,.45,,,1.55,.55,,\n")
    table = load_table(str(tmp_path / "ot.csv"))
    assert (table.media, table.task) == ("video", "object_tracking")
    assert table.rows.index.tolist() == [1, 3]
    assert table.rows["split"].tolist() == ["train", "test"]
    assert table.rows["label"].tolist() == [["car", "car"], []]
    assert table.rows[REGIONS].tolist() == [
        [(12_900_000, 0.2, 0.8, 0.3, 0.9, -1), (12_100_000, 0.8, 0.8, 0.9, 0.9, 1)], []]
    skipped = table.skipped_annotations
    assert skipped[["annotation", "image", "reason"]].values.tolist() == [
        ["line 4", 1, "box outside the image"]]
    with pytest.raises(SchemaError, match=r"the CSV file '.*ot.csv' has 1 object outside "
                                          r"the image: line 4: 'bike,2,12.50"):
        load_table(str(tmp_path / "ot.csv"), invalid_annotations="error")


def test_a_line_of_another_objective_is_named(tmp_path):
    (tmp_path / "mixed.csv").write_text("gs://b/v1.mp4,run,0,1\n"
                                        "gs://b/v1.mp4,0,60,swing,40.5\n")
    with pytest.raises(SchemaError, match=r"line 2 of the CSV file .* is not a Vertex AI "
                                          r"video classification line as line 1 is"):
        load_table(str(tmp_path / "mixed.csv"))


# --- DMVR clips CSV ---------------------------------------------------------------------

def test_a_dmvr_clips_csv_with_its_header_and_captions(tmp_path):
    (tmp_path / "input.csv").write_text(
        "video_path,start,end,label,caption\n"
        "/tmp/heic1608c.mp4,1.5,6.0,space,the view of the space from a telescope\n"
        "/tmp/BRKM_Javeline_Throw.webm,0.0,3.0,javeline_throw,\n")
    table = load_table(str(tmp_path / "input.csv"))
    assert (table.media, table.task) == ("video", "classification")
    assert table.rows["uri"].tolist() == ["/tmp/heic1608c.mp4",
                                          "/tmp/BRKM_Javeline_Throw.webm"]
    assert table.rows["label"].tolist() == ["space", "javeline_throw"]
    assert table.rows["caption"].tolist() == ["the view of the space from a telescope", ""]
    assert spans(table) == [(1_500_000, 6_000_000), (0, 3_000_000)]
    assert [c.name for c in table.inputs] == ["caption"]


def test_a_headerless_clips_csv_of_audio(tmp_path):
    (tmp_path / "clips.csv").write_text("a/dog.wav,0,1.5,bark\na/cat.m4a,2,inf,meow\n")
    table = load_table(str(tmp_path / "clips.csv"))
    assert (table.media, table.task) == ("audio", "classification")
    assert table.rows["uri"].tolist() == [str(tmp_path / "a/dog.wav"),
                                          str(tmp_path / "a/cat.m4a")]
    assert table.rows["label"].tolist() == ["bark", "meow"]
    assert spans(table) == [(0, 1_500_000), (2_000_000, None)]


# --- folders ------------------------------------------------------------------------------

def touch(root, *paths: str) -> None:
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(b"")


def test_a_folder_of_videos_by_split_and_label(tmp_path):
    touch(tmp_path, "train/run/1.mp4", "train/jump/2.mp4", "test/run/3.webm")
    table = load_table(str(tmp_path))
    assert (table.media, table.task) == ("video", "classification")
    found = sorted(zip(table.rows["uri"], table.rows["split"], table.rows["label"]))
    assert found == [(str(tmp_path / "test/run/3.webm"), "test", "run"),
                     (str(tmp_path / "train/jump/2.mp4"), "train", "jump"),
                     (str(tmp_path / "train/run/1.mp4"), "train", "run")]
    assert spans(table) == [(None, None)] * 3


@pytest.mark.parametrize("extension", ["wav", "flac", "mp3", "ogg", "m4a"])
def test_a_folder_of_audio_by_label(tmp_path, extension):
    touch(tmp_path, f"dog/a.{extension}", f"cat/b.{extension}")
    table = load_table(str(tmp_path))
    assert table.media == "audio"
    assert sorted(table.rows["label"]) == ["cat", "dog"]


def test_a_folder_of_videos_beside_images_is_refused(tmp_path):
    touch(tmp_path, "run/1.mp4", "run/2.jpg")
    with pytest.raises(SchemaError, match=r"neither video .* nor audio .* e.g. '.*2.jpg'"):
        load_table(str(tmp_path))


def test_a_folder_of_images_is_still_images(tmp_path):
    touch(tmp_path, "cat/1.jpg", "dog/2.png")
    assert load_table(str(tmp_path)).media == "image"


# --- what planning reads of a table of clips ---------------------------------------------

def test_a_large_csv_of_clips_read_in_chunks_is_the_table_read_whole(tmp_path):
    (tmp_path / "a.csv").write_text("audio_uri,label,start,end\nd.wav,bark,0,1.5\n"
                                    "c.wav,meow,,\ne.wav,bark,2,inf\n")
    whole = load_table(str(tmp_path / "a.csv"))
    chunked = load_table(str(tmp_path / "a.csv"), chunk_rows=1)
    assert (chunked.media, chunked.task) == ("audio", "classification")
    assert spans(chunked) == spans(whole) == [(0, 1_500_000), (None, None),
                                              (2_000_000, None)]
    assert str(chunked.rows[CLIP_END].dtype) == "Int64"
    assert chunked.value_hashes.tolist() == whole.value_hashes.tolist()


def test_rows_of_clips_hash_their_span_and_annotations(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [
        {"videoGcsUri": f"gs://v{i}.mp4", "temporalBoundingBoxAnnotations": [
            {"displayName": "car", "timeOffset": f"{t}s", "xMin": 0.1, "yMin": 0.1,
             "xMax": 0.5, "yMax": 0.5}]} for i, t in ((1, 1), (2, 2))])
    table = load_table(path)
    hashes = table.value_hashes  # what UNASSIGNED splits and resumed runs read
    assert len(set(hashes.tolist())) == 2
