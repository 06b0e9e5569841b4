"""COCO loading and indexing, instance geometry (shapely), pair sampling. Imports only core."""
