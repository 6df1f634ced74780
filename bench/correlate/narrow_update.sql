-- The correlation's wide UPDATE against an INSERT into a narrow table, per row (bench/results/history.md,
-- fifteenth session). Changes the database it runs on (20,000 firing alerts set back to uncorrelated):
--   .venv/bin/python bench/pages/grow_history.py && psql -h 127.0.0.1 -U postgres rootline_history -f bench/correlate/narrow_update.sql
\timing on
-- 20,000 firing alerts back to their state before correlation (as ingestion leaves them)
UPDATE incidents_alert SET correlated = false, incident_id = NULL, layer = NULL, failure_mode = NULL, classified_by = '', onset = NULL
 WHERE id IN (SELECT id FROM incidents_alert WHERE status = 'firing' ORDER BY id LIMIT 20000);
VACUUM ANALYZE incidents_alert;
CREATE TEMP TABLE v AS SELECT id, (id % 800) + 1 AS inc, 'engine'::text AS layer, 'oom'::text AS fm, 'catalog'::text AS cb,
 starts_at - interval '5 minutes' AS onset FROM incidents_alert WHERE NOT correlated;
CREATE TABLE IF NOT EXISTS alert_correlation (alert_id bigint PRIMARY KEY, incident_id bigint, layer varchar(20),
 failure_mode varchar(30), classified_by varchar(40), onset timestamptz);
CREATE INDEX IF NOT EXISTS alert_correlation_incident ON alert_correlation (incident_id);
\set wide 'UPDATE incidents_alert t SET incident_id = v.inc, correlated = true, layer = v.layer, failure_mode = v.fm, classified_by = v.cb, onset = v.onset FROM v WHERE t.id = v.id'
\set narrow 'INSERT INTO alert_correlation SELECT id, inc, layer, fm, cb, onset FROM v'
-- wide (what the correlation worker does today) and narrow, alternating, each rolled back, three rounds
BEGIN; :wide; ROLLBACK;
BEGIN; :narrow; ROLLBACK;
BEGIN; :wide; ROLLBACK;
BEGIN; :narrow; ROLLBACK;
BEGIN; :wide; ROLLBACK;
BEGIN; :narrow; ROLLBACK;
DROP TABLE alert_correlation;
