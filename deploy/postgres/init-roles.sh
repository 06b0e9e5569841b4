#!/bin/sh
# Run once by the postgres image on a new data directory (/docker-entrypoint-initdb.d), as
# the superuser, or by hand with psql's usual PG* variables: makes the login roles and the
# database of docs/deployment.md. The owner runs the migrations and owns the tables; the
# app's role gets its privileges from `vsr db upgrade --app-role <app role>` (SELECT and
# INSERT only on the audit trail). Neither is a superuser, so neither can set
# session_replication_role = replica; only the owner could disable the trail's triggers.
set -eu
: "${VSR_OWNER_PASSWORD:?set VSR_OWNER_PASSWORD}"
: "${VSR_APP_PASSWORD:?set VSR_APP_PASSWORD}"
psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres \
  -v owner="${VSR_OWNER_ROLE:-vsr_owner}" -v app="${VSR_APP_ROLE:-vsr_app}" \
  -v db="${VSR_DATABASE:-vsr}" \
  -v owner_pw="$VSR_OWNER_PASSWORD" -v app_pw="$VSR_APP_PASSWORD" <<'SQL'
CREATE ROLE :"owner" LOGIN PASSWORD :'owner_pw' NOSUPERUSER NOCREATEDB NOCREATEROLE;
CREATE ROLE :"app" LOGIN PASSWORD :'app_pw' NOSUPERUSER NOCREATEDB NOCREATEROLE;
CREATE DATABASE :"db" OWNER :"owner";
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
GRANT CONNECT, TEMPORARY ON DATABASE :"db" TO :"app";
SQL
