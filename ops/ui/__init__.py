"""The web UI at /ui/: browse repositories, tags, manifests and referrers; manage API tokens.

queries.py holds every database read (paginated in the database), manifests.py and configs.py turn
stored manifests and config blobs into what the pages show, access.py decides who may see what, and
the views only glue those to the templates under templates/ui/.
"""
