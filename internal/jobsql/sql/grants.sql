-- grants: what an application role needs on {{schema}} to run every
-- feature (enqueue, work, maintenance, locks, leadership, Migrate on a
-- current schema) once the migrations were applied by another role.
-- {{role}} is the role. Run it again after applying new migrations: ON ALL
-- covers the tables, sequences and functions that exist when it runs.
GRANT USAGE ON SCHEMA {{schema}} TO {{role}};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {{schema}} TO {{role}};
GRANT USAGE ON ALL SEQUENCES IN SCHEMA {{schema}} TO {{role}};
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {{schema}} TO {{role}};
