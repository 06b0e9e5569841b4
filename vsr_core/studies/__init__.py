"""Studies: what one collection is and how it is stored.

- ``definition``: the study file (TOML) format: load, validate, report errors by field and line.
- ``store``: stored studies (the Study table): create from a file, find by slug, the default.
- ``versions``: changing a stored study: a new version of its definition, archiving.
- ``settings``: the settings admins change at run time (StudySetting), over the file's.
- ``context``: the study a request or command works in, readable from every floor.
- ``sources``: whether a study file's annotation files and image folders are where it says.
"""
