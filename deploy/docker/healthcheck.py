"""Container health checks of compose.yaml: ``python deploy/docker/healthcheck.py web [PORT] | beat [FILE]``.

web:  GET /agent.py from gunicorn, as nginx would send it (the Host of TOPOWEB_ALLOWED_HOSTS and
      X-Forwarded-Proto: https, so neither the host check nor the HTTPS redirect answers instead).
beat: the schedule file was written lately. Beat saves it about every 3 minutes while it sends
      the sweeper task; a beat that stopped sending stops writing it.
Exit status 0 healthy, 1 not. Standard library only, no Django start-up.
"""

import glob
import http.client
import os
import sys
import time

BEAT_SCHEDULE = "/app/var/beat/celerybeat-schedule"


def web(port: str = "8000") -> bool:
    hosts = [h.strip() for h in os.environ.get("TOPOWEB_ALLOWED_HOSTS", "localhost").split(",") if h.strip()]
    host = next((h for h in hosts if not h.startswith(".") and h != "*"), "localhost")
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
    conn.request("GET", "/agent.py", headers={"Host": host, "X-Forwarded-Proto": "https"})
    response = conn.getresponse()
    response.read()
    return response.status == 200


def beat(schedule: str = BEAT_SCHEDULE) -> bool:
    sweep_every = max(10.0, int(os.environ.get("TOPOWEB_SWEEP_AFTER_SECONDS") or 120) / 2)
    files = glob.glob(glob.escape(schedule) + "*")
    if not files:
        return False
    age = time.time() - max(os.path.getmtime(f) for f in files)
    return age < max(600.0, 3 * sweep_every + 300)


if __name__ == "__main__":
    checks = {"web": web, "beat": beat}
    if len(sys.argv) not in (2, 3) or sys.argv[1] not in checks:
        sys.exit("usage: healthcheck.py web [PORT] | beat [FILE]")
    try:
        sys.exit(0 if checks[sys.argv[1]](*sys.argv[2:]) else 1)
    except Exception as exc:  # any failure is "unhealthy", said in `docker inspect`
        print(f"{sys.argv[1]}: {type(exc).__name__}: {exc}")
        sys.exit(1)
