-- The ticket-triage desk's business database (seed 003): customers (VIP or not), the
-- status of each product (the status page and per-customer monitoring), the open tickets,
-- and the pages sent to on-call. Loaded into a fresh SQLite file by tools.setup().
CREATE TABLE IF NOT EXISTS customers (
    customer_id TEXT PRIMARY KEY, name_zh TEXT NOT NULL, name_en TEXT NOT NULL,
    tier TEXT NOT NULL CHECK (tier IN ('vip', 'standard', 'trial')),
    seats INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS products (
    product TEXT PRIMARY KEY, name_zh TEXT NOT NULL, name_en TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('operational', 'degraded', 'outage'))
);
-- Monitoring per customer: what the customer's own traffic shows right now.
CREATE TABLE IF NOT EXISTS health (
    customer_id TEXT NOT NULL REFERENCES customers(customer_id),
    product TEXT NOT NULL REFERENCES products(product),
    state TEXT NOT NULL CHECK (state IN ('operational', 'degraded', 'outage')),
    failing_users INTEGER NOT NULL,
    PRIMARY KEY (customer_id, product)
);
CREATE TABLE IF NOT EXISTS tickets (
    ticket_id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, category TEXT NOT NULL,
    product TEXT NOT NULL,  -- '' when the ticket names none
    priority TEXT NOT NULL CHECK (priority IN ('P0', 'P1', 'P2', 'P3')),
    queue TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('open', 'closed')),
    idempotency_key TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL,
    body TEXT  -- the customer's own words ($message); NULL for a ticket filed from a plan
);
CREATE TABLE IF NOT EXISTS pages (
    page_id TEXT PRIMARY KEY, ticket_id TEXT NOT NULL REFERENCES tickets(ticket_id),
    idempotency_key TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL
);
-- Reports merged into an open ticket (a duplicate is a +1, never a new ticket or page).
CREATE TABLE IF NOT EXISTS ticket_reports (
    ticket_id TEXT NOT NULL REFERENCES tickets(ticket_id),
    idempotency_key TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL,
    body TEXT  -- the repeated report's own words
);

INSERT OR IGNORE INTO customers VALUES
    ('C10001', '星河科技', 'Galaxy Tech', 'vip', 1200),
    ('C10002', '云帆物流', 'Cloudsail Logistics', 'vip', 450),
    ('C10003', '青松银行', 'Evergreen Bank', 'vip', 3000),
    ('C20001', '小鹿书店', 'Fawn Books', 'standard', 80),
    ('C20002', '南山咖啡', 'Nanshan Coffee', 'standard', 30),
    ('C20003', '快马外卖', 'Swift Delivery', 'standard', 600),
    ('C30001', '个人开发者王磊', 'Lei Wang (developer)', 'trial', 1);

INSERT OR IGNORE INTO products VALUES
    ('payments', '支付', 'Payments', 'operational'),
    ('login', '登录', 'Login', 'degraded'),
    ('sms', '短信', 'SMS', 'operational'),
    ('reports', '报表', 'Reports', 'operational'),
    ('api', '开放 API', 'Open API', 'operational'),
    ('website', '官网', 'Website', 'operational'),
    ('app', '移动 App', 'Mobile app', 'operational'),
    ('storage', '文件存储', 'File storage', 'outage');

INSERT OR IGNORE INTO health VALUES
    ('C10001', 'payments', 'outage', 800),
    ('C10002', 'api', 'degraded', 60),
    ('C10003', 'sms', 'outage', 2500),
    ('C20001', 'api', 'degraded', 150),
    ('C20002', 'sms', 'outage', 12),
    ('C20003', 'payments', 'outage', 320);
