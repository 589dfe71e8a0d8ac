"""Long files cut into clips before planning (`write/clip_cutting`): each row's span cut from
its start into clips of the length asked for, the shorter last piece dropped and counted,
rows too short or unreadable rejected with their reason, timed annotations going with
their clip. The files' lengths come from the function given (the end-to-end tests read
real videos' headers)."""

import pandas as pd
import pytest

from tfrecorder.options import MediaOptions
from tfrecorder.sources.table import CLIP_END, CLIP_START, REGIONS, SEGMENTS, Table
from tfrecorder.write.clip_cutting import clip_length_us, cut_into_clips

S = 1_000_000  # a second, in microseconds


def video_table(uris, starts, ends, **columns) -> Table:
    rows = pd.DataFrame({"image_uri": uris, "uri": uris, "split": "TRAIN",
                         CLIP_START: pd.array(starts, dtype="Int64"),
                         CLIP_END: pd.array(ends, dtype="Int64"), **columns},
                        index=[f"line {i + 2}" for i in range(len(uris))])
    return Table(rows=rows, source=rows[["image_uri"]].copy(), media="video",
                 multi_label=SEGMENTS in columns or REGIONS in columns)


def lengths(**by_name):
    def duration_us(uri):
        if by_name[uri] is None:
            raise ValueError(f"no video stream in {uri!r}")
        return by_name[uri]
    return duration_us


def test_spans_are_cut_from_their_start_and_the_shorter_last_piece_is_counted():
    table = video_table(["a.mp4", "b.mp4", "c.mp4"], [None, 2 * S, None],
                        [None, 9 * S, None], label=["cat", "dog", "cat"])
    cut = cut_into_clips(table, MediaOptions(clip_seconds=3),
                         lengths(**{"a.mp4": 10 * S + 5, "c.mp4": 6 * S}))
    spans = list(zip(cut.rows["image_uri"], cut.rows[CLIP_START], cut.rows[CLIP_END]))
    assert spans == [("a.mp4", 0, 3 * S), ("a.mp4", 3 * S, 6 * S), ("a.mp4", 6 * S, 9 * S),
                     ("b.mp4", 2 * S, 5 * S), ("b.mp4", 5 * S, 8 * S),
                     ("c.mp4", 0, 3 * S), ("c.mp4", 3 * S, 6 * S)]
    assert cut.rows["label"].tolist() == ["cat"] * 3 + ["dog"] * 2 + ["cat"] * 2
    # The source rows as given, a line a clip, with the clip's span in seconds.
    assert cut.source.index.tolist() == ["line 2"] * 3 + ["line 3"] * 2 + ["line 4"] * 2
    assert cut.source["clip_start"].tolist() == [0, 3, 6, 2, 5, 0, 3]
    assert cut.clip_cuts == {"clip_seconds": 3.0, "rows": 3, "clips": 7, "tails_dropped": 2,
                             "seconds_dropped": 2.0}  # 1.000005 s of a.mp4, 1 s of b.mp4


def test_rows_shorter_than_a_clip_or_unreadable_are_rejected_with_their_reason():
    table = video_table(["a.mp4", "b.mp4", "c.mp4"], [None, 0, None], [None, 2 * S, None],
                        label=["cat", "dog", "cat"])
    cut = cut_into_clips(table, MediaOptions(clip_frames=25, frame_rate=10),  # 2.5 s
                         lengths(**{"a.mp4": 5 * S, "c.mp4": None}))
    assert cut.rows["image_uri"].tolist() == ["a.mp4", "a.mp4"]
    reasons = dict(zip(cut.rejected_rows.index, cut.rejected_rows["reason"]))
    assert reasons == {
        "line 3": "its span (2 s) is shorter than a clip (2.5 s, the clip length asked for)",
        "line 4": "cannot read its length: no video stream in 'c.mp4'"}


def test_segments_and_regions_go_with_the_clip_they_fall_in():
    segments = [[(1 * S, 4 * S), (5 * S, 5 * S), (0, 1 * S)]]
    table = video_table(["a.mp4"], [0], [6 * S], label=[["run", "jump", "sit"]],
                        **{SEGMENTS: segments})
    cut = cut_into_clips(table, MediaOptions(clip_seconds=3), lengths())
    assert cut.rows[SEGMENTS].tolist() == [[(1 * S, 3 * S), (0, 1 * S)],
                                           [(3 * S, 4 * S), (5 * S, 5 * S)]]
    assert cut.rows["label"].tolist() == [["run", "sit"], ["run", "jump"]]
    regions = [[(0, .1, .1, .5, .5, 1), (3 * S, .2, .2, .6, .6, 1), (5 * S, 0, 0, 1, 1, 2)]]
    table = video_table(["a.mp4"], [0], [6 * S], label=[["car", "car", "bus"]],
                        **{REGIONS: regions})
    cut = cut_into_clips(table, MediaOptions(clip_seconds=3), lengths())
    assert [[r[0] for r in clip] for clip in cut.rows[REGIONS]] == [[0], [3 * S, 5 * S]]
    assert cut.rows["label"].tolist() == [["car"], ["car", "bus"]]


@pytest.mark.parametrize("options, length", [
    (MediaOptions(), None), (MediaOptions(clip_seconds=1.5), 1_500_000),
    (MediaOptions(clip_frames=16, frame_rate=8), 2 * S)])
def test_the_clip_length_is_the_seconds_or_the_frames_at_the_frame_rate(options, length):
    assert clip_length_us(options) == length
