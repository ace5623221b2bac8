-- create_schema: the schema the migrations fill.
CREATE SCHEMA IF NOT EXISTS {{schema}}
