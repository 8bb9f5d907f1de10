-- The business database of the scale-out load, in PostgreSQL: examples/aftersales's
-- tables, plus exchange_entries, where the write tool logs every entry (no unique key),
-- so that a write entered again after a worker died is counted inside the tool.
-- Created once by the harness (benchmarks/scale_out/harness.py), before any worker starts.
CREATE TABLE IF NOT EXISTS products (
    sku TEXT PRIMARY KEY,
    category TEXT NOT NULL,
    name_zh TEXT NOT NULL,
    name_en TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS orders (
    order_id TEXT PRIMARY KEY,
    customer TEXT NOT NULL,
    sku TEXT NOT NULL REFERENCES products(sku),
    purchase_date DATE NOT NULL,
    price_cny NUMERIC NOT NULL,
    status TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS policies (
    category TEXT PRIMARY KEY,
    warranty_months INTEGER NOT NULL,
    exchange_allowed BOOLEAN NOT NULL
);
CREATE TABLE IF NOT EXISTS evidence (
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    kind TEXT NOT NULL,
    verified BOOLEAN NOT NULL
);
CREATE TABLE IF NOT EXISTS exchanges (
    exchange_id TEXT PRIMARY KEY,
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    reason TEXT NOT NULL,
    idempotency_key TEXT NOT NULL UNIQUE,
    run_id TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS exchange_entries (
    entry_id BIGSERIAL PRIMARY KEY,
    idempotency_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    entered_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

INSERT INTO products VALUES
    ('LJ-M404', 'printer', '激光打印机 LaserJet Pro M404', 'LaserJet Pro M404 laser printer'),
    ('SJ-2600', 'scanner', '扫描仪 ScanJet Pro 2600', 'ScanJet Pro 2600 scanner'),
    ('MN-27Q', 'monitor', '27 英寸显示器 Q27', 'Q27 27-inch monitor')
ON CONFLICT DO NOTHING;

INSERT INTO policies VALUES
    ('printer', 60, true),
    ('scanner', 12, true),
    ('monitor', 36, true)
ON CONFLICT DO NOTHING;

INSERT INTO orders VALUES
    ('HD20240501', '张伟', 'LJ-M404', '2024-05-01', 1899.0, 'delivered'),
    ('HD20250920', 'Emily Chen', 'MN-27Q', '2025-09-20', 1599.0, 'delivered')
ON CONFLICT DO NOTHING;

INSERT INTO evidence
SELECT * FROM (VALUES ('HD20240501', 'photo', true), ('HD20250920', 'photo', true)) AS e
WHERE NOT EXISTS (SELECT 1 FROM evidence);
