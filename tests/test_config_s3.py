"""S3 storage and the token backend in the configuration: what is required together, and the start-up
check of the bucket, each refused in one line that names the key and never shows a secret."""
from __future__ import annotations

import json
from typing import Any

import pytest

from regsite import config
from tests.support.s3 import BUCKET, moto_driver, refuse

S3 = {"SVC_STORAGE_BACKEND": "s3", "SVC_STORAGE_S3_BUCKET": BUCKET, "SVC_SECRET_KEY": "shared-by-replicas",
      "SVC_STORAGE_S3_ACCESS_KEY": "testing", "SVC_STORAGE_S3_SECRET_KEY": "very-secret-value"}


def _refused(environ: dict[str, str]) -> str:
    with pytest.raises(config.ConfigError) as caught:
        config.load(environ)
    return str(caught.value)


def test_it_keeps_the_filesystem_and_token_files_by_default(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = config.load({})
    assert (cfg["storage"]["backend"], cfg["auth"]["token_backend"]) == ("filesystem", "files")
    assert cfg["storage"]["redirect"] is True


def test_it_reads_every_s3_key_from_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = config.load({**S3, "SVC_STORAGE_S3_ENDPOINT": "http://127.0.0.1:7480", "SVC_STORAGE_S3_PREFIX": "reg",
                       "SVC_STORAGE_REDIRECT": "false", "SVC_STORAGE_REDIRECT_ENDPOINT": "https://s3.example"})
    storage = cfg["storage"]
    assert (storage["s3_endpoint"], storage["s3_prefix"], storage["redirect"], storage["redirect_endpoint"]) == (
        "http://127.0.0.1:7480", "reg", False, "https://s3.example")


@pytest.mark.parametrize("change, key", [
    ({"SVC_STORAGE_BACKEND": "gcs"}, "[storage] backend"),
    ({"SVC_STORAGE_S3_BUCKET": ""}, "[storage] s3_bucket"),
    ({"SVC_STORAGE_S3_ENDPOINT": "127.0.0.1:7480"}, "[storage] s3_endpoint"),
    ({"SVC_STORAGE_REDIRECT_ENDPOINT": "ftp://x"}, "[storage] redirect_endpoint"),
    ({"SVC_STORAGE_S3_SECRET_KEY": ""}, "[storage] s3_secret_key"),
    ({"SVC_AUTH_TOKEN_BACKEND": "ldap"}, "[auth] token_backend"),
])
def test_it_refuses_an_incomplete_s3_setup_naming_the_key(tmp_path, monkeypatch, change, key) -> None:
    monkeypatch.chdir(tmp_path)
    message = _refused({**S3, **change})
    assert message.startswith(key) and "very-secret-value" not in message


def test_replicas_must_be_given_one_session_key(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    without = {k: v for k, v in S3.items() if k != "SVC_SECRET_KEY"}
    assert _refused(without).startswith("[server] secret_key_file: must be set explicitly")
    assert config.load({**without, "SVC_SERVER_SECRET_KEY_FILE": str(tmp_path / "key")})["storage"]["backend"] == "s3"


def test_it_starts_only_with_a_bucket_it_can_write(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    with moto_driver():
        config.check_bucket(config.load(S3))  # exists and writable: no error
        with pytest.raises(SystemExit):
            config.load_or_exit({**S3, "SVC_STORAGE_S3_BUCKET": "no-such-bucket"}, serving=True)
    line = capsys.readouterr().err.strip()
    assert line == "configuration error: [storage] s3_bucket: bucket 'no-such-bucket' does not exist"


def test_it_does_not_start_on_a_bucket_it_cannot_write(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    with moto_driver() as driver:
        driver.client.put_bucket_policy(Bucket=BUCKET, Policy=json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject", "Resource": f"arn:aws:s3:::{BUCKET}/*"}]}))
        with pytest.raises(SystemExit):
            config.load_or_exit(S3, serving=True)
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"configuration error: [storage] s3_bucket: bucket '{BUCKET}' is not writable (")
    assert "\n" not in line and "very-secret-value" not in line


@pytest.mark.parametrize("code, key", [
    ("InvalidAccessKeyId", "s3_access_key"),
    ("SignatureDoesNotMatch", "s3_secret_key"),
    ("AccessDenied", "s3_bucket"),
])
def test_it_names_the_credential_key_the_store_refuses(tmp_path, monkeypatch, capsys, code: str, key: str) -> None:
    monkeypatch.chdir(tmp_path)
    build = config.s3_driver

    def refused(storage: Any) -> Any:  # the store answers as RGW does (tests/e2e/test_storage_rgw.py)
        driver = build(storage)
        refuse(driver, "HeadBucket", 403)
        refuse(driver, "ListObjectsV2", 403, code)
        return driver

    monkeypatch.setattr(config, "s3_driver", refused)
    with moto_driver(), pytest.raises(SystemExit):
        config.load_or_exit(S3, serving=True)
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"configuration error: [storage] {key}: ") and f"({code})" in line, line
    assert "very-secret-value" not in line
