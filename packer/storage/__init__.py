"""The storage seam: every read, listing, atomic write and lock of pack and source paths.

`local` is the one backend for now: plain files, written under a temporary name and renamed.
"""
