"""tfrecorder: tables of images -> sharded TFRecord datasets.

    import pandas as pd, tfrecorder
    df = pd.read_csv("images.csv", names=["split", "image_uri", "label"])
    result = df.tensorflow.to_tfrecord(output_dir="out/")

    train = tfrecorder.load("out/", "train", batch_size=32, image_size=(224, 224))

Importing the package registers the `df.tensorflow` accessor (named after TFRecorder
2.0's; it converts without TensorFlow). TensorFlow is the `tf` extra, imported only by
the functions that read records with it (load, inspect, verify's decoding, migrate);
`open_split` reads them without it, for PyTorch and Grain, and converting, info, show and
report never need it.
"""

from tfrecorder._interrupt import quiet_interrupt as _quiet_interrupt

# These imports take seconds (pandas); in the `tfrecorder` command, a Ctrl-C during
# them is its one `interrupted` line, not a traceback of the imports. The functions come
# from `legacy.edge`, which translates TFRecorder 2.0's spellings once, for every caller.
with _quiet_interrupt():
    from tfrecorder import accessor as _accessor  # noqa: F401  (registers df.tensorflow)
    from tfrecorder._version import __version__
    from tfrecorder.errors import (
        ConversionAborted,
        DatasetExistsError,
        DatasetWarning,
        DuplicateImagesError,
        ImageError,
        MissingExtraError,
        OutputLockedError,
        ResumeError,
        SchemaError,
        StorageError,
        TFRecorderError,
        TooManyRejectedError,
        VerificationError,
    )
    from tfrecorder.legacy.edge import convert, inspect, load, open_split, show
    from tfrecorder.legacy.functions import check_tfrecords, convert_and_load, create_tfrecords
    from tfrecorder.legacy.migration import migrate
    from tfrecorder.read.crops import CenterCrop, RandomResizedCrop
    from tfrecorder.read.info import DatasetInfo, info
    from tfrecorder.read.reader import SplitDataset
    from tfrecorder.read.report import report
    from tfrecorder.read.show import ContactSheet
    from tfrecorder.read.verify import VerifyReport, verify
    from tfrecorder.write.convert import ConversionResult

__all__ = [
    "CenterCrop",
    "ConversionAborted",
    "ContactSheet",
    "ConversionResult",
    "DatasetExistsError",
    "DatasetInfo",
    "DatasetWarning",
    "DuplicateImagesError",
    "ImageError",
    "MissingExtraError",
    "OutputLockedError",
    "RandomResizedCrop",
    "ResumeError",
    "SchemaError",
    "SplitDataset",
    "StorageError",
    "TFRecorderError",
    "TooManyRejectedError",
    "VerificationError",
    "VerifyReport",
    "__version__",
    "check_tfrecords",
    "convert",
    "convert_and_load",
    "create_tfrecords",
    "info",
    "inspect",
    "load",
    "migrate",
    "open_split",
    "report",
    "show",
    "verify",
]
