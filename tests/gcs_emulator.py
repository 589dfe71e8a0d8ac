"""`gs://` helpers for tests that go through Beam, on the GCS server of `stores.py`.

The session fixture `gcs_bucket` yields the bucket name of `gcs_store` ("test-bucket");
`upload` / `upload_bytes` put data there through Beam's `FileSystems`, which builds a new
client per call from `STORAGE_EMULATOR_HOST`, so no client keeps an old endpoint. Beam's
credentials are made anonymous by `gcs_store` (see `use_anonymous_gcs_credentials`).
"""

import pytest
from stores import use_anonymous_gcs_credentials  # noqa: F401  (re-exported for tests)


@pytest.fixture(scope="session")
def gcs_bucket(gcs_store):
    """The name of the session's bucket on the GCS emulator."""
    return gcs_store.bucket


def upload_bytes(data, gs_uri):
    """Write `data` to `gs_uri` through Beam's FileSystems, stored as is (a `.gz` name is
    not compressed again, which `FileSystems.create`'s default would do)."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.create(gs_uri, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)
    return gs_uri


def upload(local_path, gs_uri):
    """Copy a local file to `gs_uri`."""
    with open(local_path, "rb") as f:
        return upload_bytes(f.read(), gs_uri)
