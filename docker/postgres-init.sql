-- Run once by the postgres image on an empty data volume: the warehouse lives beside Airflow's metadata database
-- (connection findings_warehouse_default -> postgresql://airflow:airflow@postgres:5432/findings_warehouse).
CREATE DATABASE findings_warehouse OWNER airflow;
