/**
 * The shop's side: a stand-in for your order database and payment provider. Each chat is one
 * customer here (the chat key names them), so a customer sees only their own orders.
 */

export interface Order {
  id: string;
  item: string;
  amountCents: number;
  status: 'shipped' | 'delivered' | 'refunded';
}

const ORDERS: Record<string, Order[]> = {
  'shop-alice': [
    { id: 'A-1001', item: 'ceramic teapot', amountCents: 4200, status: 'delivered' },
    { id: 'A-1002', item: 'two mugs', amountCents: 1800, status: 'shipped' },
  ],
};

/** One of the customer's orders, or undefined. */
export function findOrder(customer: string, orderId: string): Order | undefined {
  return ORDERS[customer]?.find((o) => o.id === orderId);
}

/** Every refund the payment provider made (the example's check counts them). */
export const refundsMade: Array<{ orderId: string; amountCents: number; reason: string }> = [];

/**
 * The payment provider's refund: a side effect that must not happen twice for one order. The
 * tool calls it through `once`, so a turn that is retried (a worker died after this ran and
 * before the turn committed) gets this call's result instead of refunding again.
 */
export async function refund(customer: string, orderId: string, reason: string) {
  const order = findOrder(customer, orderId);
  if (!order) return { refunded: false, error: `no order ${orderId}` };
  refundsMade.push({ orderId, amountCents: order.amountCents, reason });
  order.status = 'refunded';
  return { refunded: true, orderId, amountCents: order.amountCents, refundId: `rf-${refundsMade.length}` };
}
