-- The order-query assistant's shop database (seed 004). Recent orders (about the last three
-- months) and the archive live in different tables; the tools hide which one they read.
CREATE TABLE IF NOT EXISTS products (
    sku TEXT PRIMARY KEY, category TEXT NOT NULL, name_zh TEXT NOT NULL, name_en TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS orders_recent (
    order_id TEXT PRIMARY KEY, customer TEXT NOT NULL, phone TEXT NOT NULL,
    sku TEXT NOT NULL REFERENCES products(sku), amount_cny REAL NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'shipped', 'completed', 'canceled')),
    created_at TEXT NOT NULL, address TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS orders_history (
    order_id TEXT PRIMARY KEY, customer TEXT NOT NULL, phone TEXT NOT NULL,
    sku TEXT NOT NULL REFERENCES products(sku), amount_cny REAL NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'shipped', 'completed', 'canceled')),
    created_at TEXT NOT NULL, address TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS logistics (
    order_id TEXT NOT NULL, carrier TEXT NOT NULL, tracking_no TEXT NOT NULL, ts TEXT NOT NULL,
    location TEXT NOT NULL, event_zh TEXT NOT NULL, event_en TEXT NOT NULL
);
-- one row per tracking event: setup runs at every load, and a home made before this
-- index holds each event once per load; those repeats go first
DELETE FROM logistics WHERE rowid NOT IN (SELECT min(rowid) FROM logistics GROUP BY order_id, ts);
CREATE UNIQUE INDEX IF NOT EXISTS logistics_event ON logistics (order_id, ts);
CREATE TABLE IF NOT EXISTS refunds (
    refund_id TEXT PRIMARY KEY, order_id TEXT NOT NULL, reason TEXT NOT NULL,
    amount_cny REAL NOT NULL, idempotency_key TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS address_changes (
    order_id TEXT NOT NULL, new_address TEXT NOT NULL, idempotency_key TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cancellations (
    order_id TEXT NOT NULL, idempotency_key TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL
);

INSERT OR IGNORE INTO products VALUES
    ('EP-PRO', 'earphones', '无线耳机 AirSound Pro', 'AirSound Pro wireless earphones'),
    ('KB-K8', 'keyboard', '机械键盘 K8', 'K8 mechanical keyboard'),
    ('SH-RUN3', 'shoes', '跑步鞋 Run 3', 'Run 3 running shoes'),
    ('CUP-500', 'cup', '保温杯 Thermo 500ml', 'Thermo 500ml vacuum cup'),
    ('AF-5', 'air_fryer', '空气炸锅 AF-5', 'AF-5 air fryer'),
    ('LMP-1', 'lamp', '护眼台灯 Lumi', 'Lumi desk lamp'),
    ('SPK-B', 'speaker', '蓝牙音箱 Boom', 'Boom bluetooth speaker'),
    ('CASE-X', 'phone_case', '手机壳 Case X', 'Case X phone case'),
    ('RC-3', 'rice_cooker', '电饭煲 RC-3', 'RC-3 rice cooker'),
    ('LG-24', 'luggage', '行李箱 Trip 24', 'Trip 24 suitcase'),
    ('CM-B', 'coffee_machine', '咖啡机 Brew', 'Brew coffee machine'),
    ('MS-ARM', 'monitor_arm', '显示器支架 Arm', 'Arm monitor stand');

INSERT OR IGNORE INTO orders_recent VALUES
    ('OD2611250001', '张伟', '13800138001', 'EP-PRO', 399, 'pending', '2026-11-25', '上海市浦东新区张江路 88 号'),
    ('OD2611200002', '李娜', '13900139002', 'KB-K8', 459, 'shipped', '2026-11-20', '北京市朝阳区建国路 1 号'),
    ('OD2611100003', '王芳', '13700137003', 'SH-RUN3', 699, 'completed', '2026-11-10', '杭州市西湖区文三路 9 号'),
    ('OD2611050004', 'Emily Chen', '13600136004', 'CUP-500', 129, 'shipped', '2026-11-05', '深圳市南山区科技园 2 栋'),
    ('OD2610280005', '刘洋', '13500135005', 'AF-5', 599, 'completed', '2026-10-28', '成都市武侯区天府大道 5 号'),
    ('OD2610150006', '陈静', '13800138001', 'LMP-1', 199, 'canceled', '2026-10-15', '上海市浦东新区张江路 88 号'),
    ('OD2609200007', '赵磊', '13300133007', 'SPK-B', 299, 'completed', '2026-09-20', '南京市鼓楼区中山路 7 号'),
    ('OD2611280008', 'James Wu', '13200132008', 'CASE-X', 59, 'pending', '2026-11-28', '广州市天河区体育西路 3 号');

INSERT OR IGNORE INTO orders_history VALUES
    ('OD2608120009', '张伟', '13800138001', 'RC-3', 399, 'completed', '2026-08-12', '上海市浦东新区张江路 88 号'),
    ('OD2607030010', '李娜', '13900139002', 'LG-24', 899, 'completed', '2026-07-03', '北京市朝阳区建国路 1 号'),
    ('OD2605180011', '王芳', '13700137003', 'CM-B', 1299, 'completed', '2026-05-18', '杭州市西湖区文三路 9 号'),
    ('OD2603010012', 'Emily Chen', '13600136004', 'MS-ARM', 239, 'canceled', '2026-03-01', '深圳市南山区科技园 2 栋');

INSERT OR IGNORE INTO logistics VALUES
    ('OD2611200002', '顺丰速运', 'SF1234567890', '2026-11-21 09:10', '深圳转运中心', '已揽收', 'picked up'),
    ('OD2611200002', '顺丰速运', 'SF1234567890', '2026-11-22 21:40', '北京顺义集散中心', '到达集散中心', 'arrived at the hub'),
    ('OD2611200002', '顺丰速运', 'SF1234567890', '2026-11-29 08:30', '北京朝阳建国路营业点', '正在派送，快递员会联系您', 'out for delivery'),
    ('OD2611100003', '中通快递', 'ZT9876543210', '2026-11-11 10:00', '义乌仓', '已揽收', 'picked up'),
    ('OD2611100003', '中通快递', 'ZT9876543210', '2026-11-14 15:20', '杭州文三路驿站', '已签收', 'delivered'),
    ('OD2611050004', '京东物流', 'JD0001112223', '2026-11-06 12:00', '东莞仓', '已揽收', 'picked up'),
    ('OD2611050004', '京东物流', 'JD0001112223', '2026-11-27 18:05', '广州白云分拣中心', '运输途中', 'in transit'),
    ('OD2610280005', '顺丰速运', 'SF5550001112', '2026-10-31 16:45', '成都武侯营业点', '已签收', 'delivered'),
    ('OD2609200007', '圆通速递', 'YT2223334445', '2026-09-24 11:11', '南京鼓楼驿站', '已签收', 'delivered'),
    ('OD2608120009', '顺丰速运', 'SF0000000009', '2026-08-15 10:00', '上海张江营业点', '已签收', 'delivered'),
    ('OD2607030010', '京东物流', 'JD0000000010', '2026-07-06 10:00', '北京朝阳营业点', '已签收', 'delivered'),
    ('OD2605180011', '中通快递', 'ZT0000000011', '2026-05-21 10:00', '杭州西湖驿站', '已签收', 'delivered');
