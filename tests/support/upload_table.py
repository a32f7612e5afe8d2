#!/usr/bin/env python3
"""Copies a local Delta table into an object-store emulator, the way a writer commits:
data files first, then the log entries in version order, so a reader following the
table never sees a commit whose files are not there yet. Files already in the store are
skipped (Delta files never change), except `_last_checkpoint`.

    upload_table.py STORE ENDPOINT BUCKET PREFIX TABLE

STORE is `s3` (moto; boto3), `azure` (Azurite; azure-storage-blob) or `gcs`
(fake-gcs-server, through its JSON API: its XML API, which object stores read through,
does not take writes). The bucket or container is created when missing.
"""

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def commit_order(root, prefix):
    """(local path, object name) pairs: data files, then the log in version order."""
    files = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            if name.endswith(".crc") or relative.startswith("_delta_log/.") or "/." in relative:
                continue
            files.append((path, f"{prefix}/{relative}"))
    return sorted(files, key=lambda f: (f[1].startswith(f"{prefix}/_delta_log/"), f[1]))


def always_upload(name):
    return name.endswith("/_last_checkpoint")


class S3:
    def __init__(self, endpoint, bucket):
        import boto3

        self.client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
        )
        self.bucket = bucket
        try:
            self.client.create_bucket(Bucket=bucket)
        except self.client.exceptions.BucketAlreadyOwnedByYou:
            pass

    def existing(self, prefix):
        names = set()
        for page in self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        ):
            names.update(item["Key"] for item in page.get("Contents", []))
        return names

    def put(self, path, name):
        self.client.upload_file(path, self.bucket, name)


class Azure:
    def __init__(self, endpoint, container):
        from azure.core.exceptions import ResourceExistsError
        from azure.storage.blob import BlobServiceClient

        service = BlobServiceClient.from_connection_string(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
            f"AccountKey={AZURITE_KEY};BlobEndpoint={endpoint}/devstoreaccount1;"
        )
        self.container = service.get_container_client(container)
        try:
            self.container.create_container()
        except ResourceExistsError:
            pass

    def existing(self, prefix):
        return {blob.name for blob in self.container.list_blobs(name_starts_with=prefix)}

    def put(self, path, name):
        with open(path, "rb") as data:
            self.container.upload_blob(name, data, overwrite=True)


class Gcs:
    def __init__(self, endpoint, bucket):
        self.endpoint = endpoint
        self.bucket = bucket
        request = urllib.request.Request(
            f"{endpoint}/storage/v1/b?project=sluice-tests",
            data=json.dumps({"name": bucket}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            urllib.request.urlopen(request, timeout=30).close()
        except urllib.error.HTTPError as error:
            if error.code != 409:
                raise

    def existing(self, prefix):
        names, token = set(), None
        while True:
            query = {"prefix": prefix}
            if token:
                query["pageToken"] = token
            url = f"{self.endpoint}/storage/v1/b/{self.bucket}/o?" + urllib.parse.urlencode(query)
            with urllib.request.urlopen(url, timeout=30) as response:
                page = json.load(response)
            names.update(item["name"] for item in page.get("items", []))
            token = page.get("nextPageToken")
            if not token:
                return names

    def put(self, path, name):
        query = urllib.parse.urlencode({"uploadType": "media", "name": name})
        with open(path, "rb") as data:
            request = urllib.request.Request(
                f"{self.endpoint}/upload/storage/v1/b/{self.bucket}/o?{query}",
                data=data.read(),
                headers={"Content-Type": "application/octet-stream"},
                method="POST",
            )
        urllib.request.urlopen(request, timeout=30).close()


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    store, endpoint, bucket, prefix, table = sys.argv[1:]
    client = {"s3": S3, "azure": Azure, "gcs": Gcs}[store](endpoint, bucket)
    existing = client.existing(prefix + "/")
    for path, name in commit_order(table, prefix):
        if name not in existing or always_upload(name):
            client.put(path, name)


if __name__ == "__main__":
    main()
