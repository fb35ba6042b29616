-- name: stale_tables
-- The tables autovacuum would ANALYZE now: rows changed since their last ANALYZE past
-- autovacuum_analyze_threshold + autovacuum_analyze_scale_factor x their rows, the table's own
-- storage parameters first, the server's settings else; a table with autovacuum_enabled=false
-- is left alone, as autovacuum leaves it (wraparound aside). Plain tables only: autovacuum
-- does not ANALYZE a partitioned parent, only its partitions.
WITH t AS (
    SELECT format('%I.%I', s.schemaname, s.relname) AS name, s.n_mod_since_analyze AS changed,
           greatest(c.reltuples, 0) AS rows_, o.threshold, o.scale, o.enabled
    FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
    CROSS JOIN LATERAL (  -- one row per table, its options NULL where it sets none
        SELECT max(option_value) FILTER (WHERE option_name = 'autovacuum_analyze_threshold') AS threshold,
               max(option_value) FILTER (WHERE option_name = 'autovacuum_analyze_scale_factor') AS scale,
               max(option_value) FILTER (WHERE option_name = 'autovacuum_enabled') AS enabled
        FROM pg_options_to_table(c.reloptions)) o
    WHERE c.relkind = 'r'
)
SELECT name FROM t
WHERE coalesce(enabled, 'true')::boolean
  AND changed > coalesce(threshold, current_setting('autovacuum_analyze_threshold'))::float8
              + coalesce(scale, current_setting('autovacuum_analyze_scale_factor'))::float8 * rows_
ORDER BY name
