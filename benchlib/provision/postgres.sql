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
