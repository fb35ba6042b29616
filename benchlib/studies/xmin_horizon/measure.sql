-- The xmin-horizon study's own statements (the queues bring theirs).
-- name: bystander_install
DROP TABLE IF EXISTS bystander;
CREATE TABLE bystander (id bigint PRIMARY KEY, payload text NOT NULL);

-- name: bystander_fill
-- 256-byte payloads, filled server-side in one statement
INSERT INTO bystander (id, payload)
SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, $1::bigint) AS g;

-- name: bystander_settle
VACUUM ANALYZE bystander;

-- name: bystander_lookup
SELECT payload FROM bystander WHERE id = $1;

-- name: wal_level
SELECT current_setting('wal_level');

-- name: settings_named
-- The server's values of the settings the study asked for, recorded per cell.
SELECT name, current_setting(name) AS value FROM pg_settings WHERE name = ANY($1::text[]);
