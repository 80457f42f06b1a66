"""The word "upload": files a user sends (face photos, target photos and videos).

content (checks by content before anything is saved, safe names), decoding (memory-bounded
decoding of what was sent), store (files sent ahead of Start, piece by piece, claimed by a Start),
on_complete (what is checked the moment such a file is complete).
"""
