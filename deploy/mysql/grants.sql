-- The privileges of Orbit Console's two database users (docs/deployment.md). Applied once by
-- init-users.sh when the database volume is created; tests/ops/test_database_grants.py applies
-- this same file to a test database and checks what each user can and cannot do.
--
-- The runtime user (the console replicas, the reconciler): rows only. No CREATE, ALTER or DROP
-- (so no TRUNCATE either, which needs DROP), no TRIGGER, no GRANT: it cannot empty, reshape or
-- unprotect the append-only audit tables, whose triggers refuse its UPDATE and DELETE.
GRANT SELECT, INSERT, UPDATE, DELETE ON `orbit`.* TO 'orbit'@'%';

-- The migration user (the one-shot migrate service): everything on the database, nothing else.
GRANT ALL PRIVILEGES ON `orbit`.* TO 'orbit_migrate'@'%';
