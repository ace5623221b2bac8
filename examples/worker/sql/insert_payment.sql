INSERT INTO shop.payments (order_id, amount_cents, job_id, fence) VALUES ($1, $2, $3, $4)
