-- A group sent again: 20,000 stored firing alerts upserted again unchanged, the update written
-- every time against skipped when nothing changes (bench/results/history.md, fifteenth session). Rolled back:
--   .venv/bin/python bench/pages/grow_history.py && psql -h 127.0.0.1 -U postgres rootline_history -f bench/ingest/resent_group.sql
\timing on
CREATE TEMP TABLE resend AS SELECT fingerprint, starts_at, labels, annotations, alertname, generator_url
 FROM incidents_alert WHERE status = 'firing' ORDER BY id LIMIT 20000;
\set upsert 'INSERT INTO incidents_alert AS t (fingerprint, starts_at, status, kind, alertname, labels, annotations, generator_url, received_at, false_positive, integration_id, classified_by, correlated, correlation_key) SELECT fingerprint, starts_at, ''firing'', ''alert'', alertname, labels, annotations, generator_url, now(), false, 1, '''', false, '''' FROM resend ORDER BY fingerprint, starts_at ON CONFLICT (fingerprint, starts_at) DO UPDATE SET labels = EXCLUDED.labels, annotations = EXCLUDED.annotations, alertname = EXCLUDED.alertname, generator_url = EXCLUDED.generator_url'
\set unless_unchanged 'WHERE (t.labels, t.annotations, t.alertname, t.generator_url) IS DISTINCT FROM (EXCLUDED.labels, EXCLUDED.annotations, EXCLUDED.alertname, EXCLUDED.generator_url)'
-- rewritten every time, then skipped when unchanged (as the app does since), alternating, three rounds
BEGIN; :upsert; ROLLBACK;
BEGIN; :upsert :unless_unchanged; ROLLBACK;
BEGIN; :upsert; ROLLBACK;
BEGIN; :upsert :unless_unchanged; ROLLBACK;
BEGIN; :upsert; ROLLBACK;
BEGIN; :upsert :unless_unchanged; ROLLBACK;
