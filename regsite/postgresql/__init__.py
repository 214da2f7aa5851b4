"""The PostgreSQL database backend: Django's, with connections that ride through a failover (base.py)."""
