"""gunicorn settings for topoweb's web server (pages, API, /agent.py), used by topoweb-web.service
and the container image: ``gunicorn --config deploy/server/gunicorn.conf.py topoweb.wsgi:application``.

Command-line options and GUNICORN_CMD_ARGS override these (the image adds ``--bind 0.0.0.0:8000``).
Sizing: docs/ingestion.md "Production" and docs/deploy.md.
"""

import os

# Behind nginx on the same machine. Never expose gunicorn itself: the server trusts the
# X-Forwarded-Proto header nginx sets (TOPOWEB_PROXY_SSL_HEADER), so a client reaching gunicorn
# directly could claim HTTPS.
bind = ["127.0.0.1:8000"]

# One process per core, 4 threads each. WEB_CONCURRENCY sets the process count; the default
# stays small because each thread may hold a PostgreSQL connection (TOPOWEB_DB_CONN_MAX_AGE):
# processes x threads + Celery processes, over every machine, must stay below max_connections.
workers = int(os.environ.get("WEB_CONCURRENCY") or min(4, len(os.sched_getaffinity(0))))
worker_class = "gthread"  # a slow or far-away agent holds a thread, not a whole process
threads = 4
backlog = 2048  # a burst of agents waits in the kernel's queue instead of being refused
timeout = 60
graceful_timeout = 30
keepalive = 5
# Recycle processes now and then (memory growth of long-lived Python processes).
max_requests = 20000
max_requests_jitter = 2000

accesslog = "-"  # the journal, or the container's log
errorlog = "-"
loglevel = os.environ.get("TOPOWEB_LOG_LEVEL", "INFO").lower()
# Real client addresses in the access log: nginx's X-Forwarded-For.
access_log_format = '%({x-forwarded-for}i)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s %(L)ss "%(a)s"'
