//! A queue between two pipeline stages, bounded by the bytes it holds rather than by a
//! count of items, so a stage's read-ahead costs the same memory whatever the batch size.

use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc};

/// Bytes are counted in units of this many, so that a semaphore's `u32` permits cover
/// queues of any size.
const UNIT: usize = 1024;

/// The sending half.
pub(crate) struct ByteSender<T> {
    items: mpsc::UnboundedSender<(T, u32)>,
    room: Arc<Semaphore>,
    capacity: u32,
}

/// The receiving half. Dropping it makes every send fail, waiting ones included.
pub(crate) struct ByteReceiver<T> {
    items: mpsc::UnboundedReceiver<(T, u32)>,
    room: Arc<Semaphore>,
}

/// A queue holding at most `capacity_bytes` (an item larger than that on its own is let
/// through when the queue is empty).
pub(crate) fn byte_queue<T>(capacity_bytes: usize) -> (ByteSender<T>, ByteReceiver<T>) {
    let capacity = u32::try_from(capacity_bytes.div_ceil(UNIT))
        .unwrap_or(u32::MAX)
        .max(1);
    let room = Arc::new(Semaphore::new(capacity as usize));
    let (sender, receiver) = mpsc::unbounded_channel();
    (
        ByteSender {
            items: sender,
            room: room.clone(),
            capacity,
        },
        ByteReceiver {
            items: receiver,
            room,
        },
    )
}

impl<T> ByteSender<T> {
    /// Queues `item`, which holds `bytes`, once there is room; gives it back when the
    /// receiver is gone.
    pub(crate) async fn send(&self, item: T, bytes: usize) -> Result<(), T> {
        let units = u32::try_from(bytes.div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .clamp(1, self.capacity);
        match self.room.acquire_many(units).await {
            Ok(permit) => permit.forget(),
            Err(_) => return Err(item),
        }
        self.items.send((item, units)).map_err(|back| back.0.0)
    }

    /// Resolves when the receiver is gone.
    pub(crate) async fn closed(&self) {
        self.items.closed().await;
    }
}

impl<T> ByteReceiver<T> {
    /// The next item, or `None` once every sender is gone and the queue is empty.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        let (item, units) = self.items.recv().await?;
        self.room.add_permits(units as usize);
        Some(item)
    }
}

impl<T> Drop for ByteReceiver<T> {
    fn drop(&mut self) {
        self.room.close();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_full_queue_holds_the_sender_until_the_receiver_takes_an_item() {
        let (sender, mut receiver) = byte_queue::<u32>(4 * UNIT);
        sender.send(1, 3 * UNIT).await.unwrap();
        let blocked = tokio::time::timeout(Duration::from_millis(50), sender.send(2, 2 * UNIT));
        assert!(blocked.await.is_err(), "the second item does not fit");
        assert_eq!(receiver.recv().await, Some(1));
        sender.send(2, 2 * UNIT).await.unwrap();
        assert_eq!(receiver.recv().await, Some(2));
    }

    #[tokio::test]
    async fn an_item_larger_than_the_queue_passes_alone() {
        let (sender, mut receiver) = byte_queue::<u32>(UNIT);
        sender.send(1, 100 * UNIT).await.unwrap();
        assert_eq!(receiver.recv().await, Some(1));
    }

    #[tokio::test]
    async fn a_waiting_sender_gets_its_item_back_when_the_receiver_goes() {
        let (sender, receiver) = byte_queue::<u32>(UNIT);
        sender.send(1, UNIT).await.unwrap();
        let waiting = tokio::spawn(async move { sender.send(2, UNIT).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(receiver);
        assert_eq!(waiting.await.unwrap(), Err(2));
    }
}
