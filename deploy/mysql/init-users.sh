#!/bin/sh
# Runs once, when the MySQL volume is first initialised (/docker-entrypoint-initdb.d): the two
# users of docs/deployment.md, with the privileges of grants.sql.
set -eu
mysql --user=root --password="$MYSQL_ROOT_PASSWORD" <<SQL
CREATE USER 'orbit'@'%' IDENTIFIED BY '${MYSQL_PASSWORD}';
CREATE USER 'orbit_migrate'@'%' IDENTIFIED BY '${MYSQL_MIGRATE_PASSWORD}';
SQL
mysql --user=root --password="$MYSQL_ROOT_PASSWORD" < /docker-entrypoint-initdb.d/grants.sql.in
