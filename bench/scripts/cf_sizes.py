#!/usr/bin/env python3
"""Bytes on disk per RocksDB column family of each shard of an index (SST files, from RocksDB's own
"rocksdb.total-sst-files-size" property through librocksdb's C API, the database opened read-only).
Prints one JSON line: {"docs": N, "column_families": {name: bytes, ...}, "bytes_per_doc": {name: ...}}.
usage: cf_sizes.py INDEX_DIR      (INDEX_DIR holds manifest.json; librocksdb.so from Debian's librocksdb-dev)
"""
import ctypes
import ctypes.util
import json
import os
import sys


def lib():
    path = ctypes.util.find_library("rocksdb") or "librocksdb.so"
    r = ctypes.CDLL(path)
    vp, cp, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
    r.rocksdb_options_create.restype = vp
    r.rocksdb_list_column_families.restype = ctypes.POINTER(cp)
    r.rocksdb_list_column_families.argtypes = [vp, cp, ctypes.POINTER(sz), ctypes.POINTER(cp)]
    r.rocksdb_open_for_read_only_column_families.restype = vp
    r.rocksdb_open_for_read_only_column_families.argtypes = [
        vp, cp, ctypes.c_int, ctypes.POINTER(cp), ctypes.POINTER(vp), ctypes.POINTER(vp), ctypes.c_ubyte,
        ctypes.POINTER(cp)]
    r.rocksdb_property_value_cf.restype = ctypes.c_void_p  # malloc'd C string
    r.rocksdb_property_value_cf.argtypes = [vp, vp, cp]
    r.rocksdb_close.argtypes = [vp]
    r.rocksdb_column_family_handle_destroy.argtypes = [vp]
    r.rocksdb_free.argtypes = [vp]
    return r


def shard_sizes(r, path):
    opts = r.rocksdb_options_create()
    err = ctypes.c_char_p()
    n = ctypes.c_size_t()
    names = r.rocksdb_list_column_families(opts, path.encode(), ctypes.byref(n), ctypes.byref(err))
    if err.value:
        sys.exit("%s: %s" % (path, err.value.decode()))
    cfs = [names[i] for i in range(n.value)]
    arr = (ctypes.c_char_p * len(cfs))(*cfs)
    cf_opts = (ctypes.c_void_p * len(cfs))(*[opts] * len(cfs))
    handles = (ctypes.c_void_p * len(cfs))()
    db = r.rocksdb_open_for_read_only_column_families(opts, path.encode(), len(cfs), arr, cf_opts, handles, 0,
                                                      ctypes.byref(err))
    if err.value:
        sys.exit("%s: %s" % (path, err.value.decode()))
    out = {}
    for name, h in zip(cfs, handles):
        v = r.rocksdb_property_value_cf(db, h, b"rocksdb.total-sst-files-size")
        out[name.decode()] = int(ctypes.string_at(v).decode()) if v else 0
        if v:
            r.rocksdb_free(v)
    for h in handles:
        r.rocksdb_column_family_handle_destroy(h)
    r.rocksdb_close(db)
    return out


def main():
    index = sys.argv[1]
    manifest = json.load(open(os.path.join(index, "manifest.json")))
    r = lib()
    total, docs = {}, 0
    for s in manifest["shards"]:
        docs += s["doc_end"] - s["doc_begin"]
        for name, b in shard_sizes(r, os.path.join(index, s["path"])).items():
            total[name] = total.get(name, 0) + b
    print(json.dumps({"docs": docs, "column_families": total,
                      "bytes_per_doc": {k: round(v / docs, 1) for k, v in total.items()} if docs else {}}))


if __name__ == "__main__":
    main()
