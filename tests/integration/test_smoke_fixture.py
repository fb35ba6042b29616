import pytest
pytestmark = pytest.mark.integration

async def test_pg_db_is_isolated(pg_db):
    conn = await pg_db.connect()
    try:
        assert (await conn.fetchval("select current_database()")).startswith("t_")
    finally:
        await conn.close()
