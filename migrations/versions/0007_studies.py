"""several studies in one deployment

- study: slug, name, the definition file's text and sha256, its default language, is_default;
  the default study (slug from studies/vsr.toml, id 1) is inserted here;
- study_id (NOT NULL, FK study.id, indexed) on the tables a study owns: imagepair, example
  (denormalised from its pair, for unjoined dashboard queries), batch, job, matchrun,
  invitetoken, platformstudy; every existing row goes to the default study;
- studysetting: the key becomes (study_id, key);
- uq_pair and ix_example_open gain study_id (two studies may pair the same images; the
  queue walks one study's open Examples only).

platformsubmission.study_id / platformaction.study_id (0006) keep pointing at platformstudy.

On SQLite the tables are copied (batch mode) with foreign keys off (migrations/env.py).
Downgrade refuses while more than one study exists: it could only drop their data.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 05:30:00
"""
import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

import vsr_core.types

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_S = sqlmodel.sql.sqltypes.AutoString
_OWNED = ('imagepair', 'example', 'batch', 'job', 'matchrun', 'invitetoken', 'platformstudy')
_OPEN_WHERE = 'queue_open AND NOT is_gold'


def _default_definition() -> tuple[str, str, str, str]:
    """(slug, name, text, language) of the shipped default study file."""
    from vsr_core.studies.definition import default_study_path, parse_study

    path = default_study_path()
    text = path.read_text(encoding='utf-8')
    study = parse_study(text, str(path))
    return study.slug, study.name, text, study.default_language.code


def upgrade() -> None:
    study = op.create_table(
        'study',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('slug', _S(length=63), nullable=False),
        sa.Column('name', _S(length=200), nullable=False),
        sa.Column('definition', sa.Text(), nullable=False),
        sa.Column('definition_hash', _S(length=64), nullable=False),
        sa.Column('language', _S(length=35), nullable=False),
        sa.Column('is_default', sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column('created_at', vsr_core.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_study_slug'), ['slug'], unique=True)
    slug, name, text, language = _default_definition()
    # id 1: the models' DEFAULT_STUDY_ID (server default of every study_id below).
    op.bulk_insert(study, [{
        'id': 1, 'slug': slug, 'name': name, 'definition': text,
        'definition_hash': hashlib.sha256(text.encode('utf-8')).hexdigest(),
        'language': language, 'is_default': True, 'created_at': vsr_core.types.utcnow(),
    }])
    if op.get_bind().dialect.name == 'postgresql':
        op.execute("SELECT setval(pg_get_serial_sequence('study', 'id'), 1)")

    with op.batch_alter_table('example', schema=None) as batch_op:
        batch_op.drop_index('ix_example_open')
    for table in _OWNED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(
                sa.Column('study_id', sa.Integer(), server_default='1', nullable=False)
            )
            batch_op.create_index(batch_op.f(f'ix_{table}_study_id'), ['study_id'])
            batch_op.create_foreign_key(
                batch_op.f(f'fk_{table}_study_id_study'), 'study', ['study_id'], ['id']
            )
    with op.batch_alter_table('imagepair', schema=None) as batch_op:
        batch_op.drop_constraint('uq_pair', type_='unique')
        batch_op.create_unique_constraint(
            'uq_pair', ['study_id', 'image1_id', 'image2_id', 'concept_a', 'concept_b']
        )
    with op.batch_alter_table('example', schema=None) as batch_op:
        batch_op.create_index(
            'ix_example_open', ['study_id', 'id'], unique=False,
            postgresql_where=sa.text(_OPEN_WHERE), sqlite_where=sa.text(_OPEN_WHERE),
        )
    with op.batch_alter_table('studysetting', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('study_id', sa.Integer(), server_default='1', nullable=False)
        )
    _replace_setting_key(['study_id', 'key'])
    if op.get_bind().dialect.name == 'postgresql':
        op.create_foreign_key(
            'fk_studysetting_study_id_study', 'studysetting', 'study', ['study_id'], ['id']
        )


def _replace_setting_key(columns: list[str]) -> None:
    """studysetting's primary key over ``columns``. The 0001 key is unnamed: PostgreSQL
    calls it studysetting_pkey; on SQLite the table is copied."""
    if op.get_bind().dialect.name == 'postgresql':
        op.drop_constraint('studysetting_pkey', 'studysetting', type_='primary')
        op.create_primary_key('studysetting_pkey', 'studysetting', columns)
        return
    # SQLite cannot change a primary key: copy the table by hand (batch mode keeps the
    # reflected key). Foreign keys are off during the migration (env.py).
    cols = ', '.join(columns)
    fk = ''
    if 'study_id' in columns:
        fk = (', CONSTRAINT fk_studysetting_study_id_study FOREIGN KEY(study_id) '
              'REFERENCES study (id)')
    study_col = "study_id INTEGER DEFAULT '1' NOT NULL, " if 'study_id' in columns else ''
    op.execute(
        'CREATE TABLE _studysetting_new ('
        f'{study_col}"key" VARCHAR(64) NOT NULL, value JSON, updated_at DATETIME NOT NULL, '
        f'PRIMARY KEY ({cols}){fk})'
    )
    copied = ('study_id, ' if 'study_id' in columns else '') + '"key", value, updated_at'
    op.execute(f'INSERT INTO _studysetting_new ({copied}) SELECT {copied} FROM studysetting')
    op.execute('DROP TABLE studysetting')
    op.execute('ALTER TABLE _studysetting_new RENAME TO studysetting')


def downgrade() -> None:
    bind = op.get_bind()
    count = bind.execute(sa.text('SELECT count(*) FROM study')).scalar_one()
    if count > 1:
        raise RuntimeError(
            f'cannot downgrade below 0007: this database holds {count} studies, and the '
            'older schema has room for one. Export and delete the other studies first.'
        )
    if bind.dialect.name == 'postgresql':
        op.drop_constraint('fk_studysetting_study_id_study', 'studysetting', type_='foreignkey')
        _replace_setting_key(['key'])
        op.drop_column('studysetting', 'study_id')
    else:
        _replace_setting_key(['key'])  # the copy leaves study_id out
    with op.batch_alter_table('example', schema=None) as batch_op:
        batch_op.drop_index('ix_example_open')
    with op.batch_alter_table('imagepair', schema=None) as batch_op:
        batch_op.drop_constraint('uq_pair', type_='unique')
        batch_op.create_unique_constraint(
            'uq_pair', ['image1_id', 'image2_id', 'concept_a', 'concept_b']
        )
    for table in reversed(_OWNED):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(batch_op.f(f'fk_{table}_study_id_study'), type_='foreignkey')
            batch_op.drop_index(batch_op.f(f'ix_{table}_study_id'))
            batch_op.drop_column('study_id')
    with op.batch_alter_table('example', schema=None) as batch_op:
        batch_op.create_index(
            'ix_example_open', ['id'], unique=False,
            postgresql_where=sa.text(_OPEN_WHERE), sqlite_where=sa.text(_OPEN_WHERE),
        )
    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_study_slug'))
    op.drop_table('study')
