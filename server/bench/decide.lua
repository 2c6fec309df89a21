-- The request `scripts/bench-server` sends with wrk: one allowed read_file call
-- (the allowlist denies bash, write_file and str_replace), as an agent would.
wrk.method = "POST"
wrk.body = '{"name": "read_file", "args": {"path": "/mnt/user-data/workspace/README.md"}, "id": "call-1"}'
wrk.headers["Content-Type"] = "application/json"
