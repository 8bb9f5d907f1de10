-- The after-sales business database: orders, warranty policies, evidence, exchanges,
-- repairs.
-- Loaded into a fresh SQLite file by tools.setup(); edit here, never the .db file.
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
    purchase_date TEXT NOT NULL,
    price_cny REAL NOT NULL,
    status TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS policies (
    category TEXT PRIMARY KEY,
    warranty_months INTEGER NOT NULL,
    exchange_allowed INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS evidence (
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    kind TEXT NOT NULL,
    verified INTEGER NOT NULL
);
-- one row per piece of evidence: setup runs at every load, and a home made before this
-- index holds each one once per load; those repeats go first
DELETE FROM evidence WHERE rowid NOT IN (SELECT min(rowid) FROM evidence GROUP BY order_id, kind);
CREATE UNIQUE INDEX IF NOT EXISTS evidence_kind ON evidence (order_id, kind);
CREATE TABLE IF NOT EXISTS exchanges (
    exchange_id TEXT PRIMARY KEY,
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    reason TEXT NOT NULL,
    idempotency_key TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL
);
-- a repair booked for an order: what the engineer calls back about (free in warranty,
-- quoted first when charged)
CREATE TABLE IF NOT EXISTS repairs (
    repair_id TEXT PRIMARY KEY,
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    in_warranty INTEGER NOT NULL,
    status TEXT NOT NULL,
    idempotency_key TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL
);

INSERT OR IGNORE INTO products VALUES
    ('LJ-M404', 'printer', '激光打印机 LaserJet Pro M404', 'LaserJet Pro M404 laser printer'),
    ('IJ-2720', 'inkjet', '喷墨打印机 DeskJet 2720', 'DeskJet 2720 inkjet printer'),
    ('SJ-2600', 'scanner', '扫描仪 ScanJet Pro 2600', 'ScanJet Pro 2600 scanner'),
    ('MN-27Q', 'monitor', '27 英寸显示器 Q27', 'Q27 27-inch monitor'),
    ('RT-AX3', 'router', '无线路由器 AX3000', 'AX3000 wireless router'),
    ('NB-14', 'laptop', '笔记本电脑 Book 14', 'Book 14 laptop'),
    ('PJ-H6', 'projector', '投影仪 H6', 'H6 projector'),
    ('SD-C12', 'shredder', '碎纸机 C12', 'C12 paper shredder');

INSERT OR IGNORE INTO policies VALUES
    ('printer', 60, 1),
    ('inkjet', 24, 1),
    ('scanner', 12, 1),
    ('monitor', 36, 1),
    ('router', 24, 1),
    ('laptop', 24, 0),
    ('projector', 24, 1),
    ('shredder', 12, 1);

INSERT OR IGNORE INTO orders VALUES
    ('HD20240501', '张伟', 'LJ-M404', '2024-05-01', 1899.0, 'delivered'),
    ('HD20230315', '李娜', 'SJ-2600', '2023-03-15', 2399.0, 'delivered'),
    ('HD20221108', '王芳', 'IJ-2720', '2022-11-08', 499.0, 'delivered'),
    ('HD20250920', 'Emily Chen', 'MN-27Q', '2025-09-20', 1599.0, 'delivered'),
    ('HD20260210', '刘洋', 'RT-AX3', '2026-02-10', 399.0, 'delivered'),
    ('HD20241111', 'James Wu', 'SD-C12', '2024-11-11', 699.0, 'delivered'),
    ('HD20250603', '陈静', 'NB-14', '2025-06-03', 5999.0, 'delivered'),
    ('HD20260801', '赵磊', 'PJ-H6', '2026-08-01', 3299.0, 'shipped');

INSERT OR IGNORE INTO evidence VALUES
    ('HD20240501', 'photo', 1),
    ('HD20230315', 'diagnostic_report', 1),
    ('HD20250920', 'photo', 1),
    ('HD20241111', 'photo', 0);
