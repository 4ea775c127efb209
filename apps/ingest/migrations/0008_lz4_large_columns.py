"""lz4 TOAST compression for the other large columns on PostgreSQL servers built with it.

0007 set it on the snapshot documents and raw uploads. The raw text of fabric discoveries (an
ibnetdiscover of a 2,000-switch fabric is ~9 MB) and of runs, the fabric documents and a plan's
pasted sections are compressed with pglz until now: on a 1 MB report lz4 writes in a twelfth of
pglz's time and stores a quarter of its bytes (docs/performance.md, "Storage per snapshot"). Values
written from now on; older ones keep pglz until rewritten. Other databases: nothing to do.
"""

from django.db import migrations

COLUMNS = (("Fabric", "raw"), ("Fabric", "document"), ("Run", "raw"), ("Plan", "base_sections"))


def _set(method: str):
    def apply(apps, schema_editor):
        conn = schema_editor.connection
        if conn.vendor != "postgresql":
            return
        q = schema_editor.quote_name
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND %s = ANY(enumvals)",
                        [method])
            if cur.fetchone() is None:
                return  # a server built without lz4 (or older than 14): pglz stays
            for model, field in COLUMNS:
                meta = apps.get_model("ingest", model)._meta
                cur.execute(f"ALTER TABLE {q(meta.db_table)} ALTER COLUMN {q(meta.get_field(field).column)} "
                            f"SET COMPRESSION {method}")
    return apply


class Migration(migrations.Migration):

    dependencies = [
        ("ingest", "0007_host_layouts"),
    ]

    operations = [
        migrations.RunPython(_set("lz4"), _set("pglz")),
    ]
