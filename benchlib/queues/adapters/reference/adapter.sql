-- The reference adapter's queue: the skip_locked design, in a table of its own.

-- name: uninstall
DROP TABLE IF EXISTS reference_adapter_jobs;

-- name: install
CREATE TABLE reference_adapter_jobs (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    state   text NOT NULL DEFAULT 'ready',
    payload jsonb NOT NULL
);
CREATE INDEX reference_adapter_jobs_ready ON reference_adapter_jobs (id) WHERE state = 'ready';

-- name: enqueue
INSERT INTO reference_adapter_jobs (payload)
SELECT p FROM unnest($1::jsonb[]) AS p
RETURNING id;

-- name: dequeue
UPDATE reference_adapter_jobs SET state = 'claimed'
WHERE id IN (SELECT id FROM reference_adapter_jobs WHERE state = 'ready'
             ORDER BY id FOR UPDATE SKIP LOCKED LIMIT $1)
RETURNING id, (payload->>'seq')::bigint AS seq;

-- name: ack
UPDATE reference_adapter_jobs SET state = 'done' WHERE id = ANY($1::bigint[]);
