-- name: version
SELECT version();

-- name: server_version_num
SELECT current_setting('server_version_num')::int;

-- name: non_default_settings
-- Everything that differs from the compiled-in default, so a reader can rebuild the
-- server that produced a number ('override' = set by initdb for this data dir).
SELECT name, current_setting(name) AS value, source
FROM pg_settings
WHERE source <> 'default'
ORDER BY name;

-- name: settings_named
-- SHOW-style values (with units), the form `postgres -C` prints too.
SELECT name, current_setting(name) AS value FROM pg_settings WHERE name = ANY($1::text[]);

-- name: is_superuser
SELECT rolsuper FROM pg_roles WHERE rolname = current_user;

-- name: connection_limits
-- reserved_connections exists from PostgreSQL 16 on (missing_ok: NULL before).
SELECT current_setting('max_connections')::int AS max_connections,
       current_setting('superuser_reserved_connections')::int
         + coalesce(current_setting('reserved_connections', true)::int, 0) AS reserved,
       (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int AS in_use;

-- name: end_clients
-- Every other client backend, ended server-side (a stopped one acts on it only when continued).
SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int
FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid();

-- name: other_clients
SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid();
