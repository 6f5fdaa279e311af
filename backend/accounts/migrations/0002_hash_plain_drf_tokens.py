"""Hash the plain tokens DRF's authtoken kept, so clients holding one keep working, then drop its table.

Runs on a database that had ``rest_framework.authtoken`` installed; a new database has no such table
and this does nothing. There is no way back: the plain tokens are gone by design.
"""

from django.db import migrations

from qoelab_web.tokens import hash_token


def hash_plain_tokens(apps, schema_editor):  # type: ignore[no-untyped-def]
    conn = schema_editor.connection
    if "authtoken_token" not in conn.introspection.table_names():
        return
    ApiToken = apps.get_model("accounts", "ApiToken")  # noqa: N806
    with conn.cursor() as cur:
        cur.execute("SELECT key, user_id, created FROM authtoken_token")
        rows = cur.fetchall()
    for key, user_id, created in rows:
        row, _ = ApiToken.objects.get_or_create(token_hash=hash_token(key), defaults={"user_id": user_id})
        ApiToken.objects.filter(pk=row.pk).update(created=created)  # keep the age (auto_now_add)
    with conn.cursor() as cur:
        cur.execute("DROP TABLE authtoken_token")
        # The app is no longer installed: forget its migrations so installing it again starts clean.
        cur.execute("DELETE FROM django_migrations WHERE app = 'authtoken'")


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]

    operations = [migrations.RunPython(hash_plain_tokens, migrations.RunPython.noop, elidable=True)]
