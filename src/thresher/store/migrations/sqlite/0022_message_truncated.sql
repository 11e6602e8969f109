-- A message longer than the max_message_bytes setting (issue 20) is stored in the index
-- from its start only (raw, body, search), and whole in a file of the home folder,
-- HOME/messages/<sha256[:2]>/<sha256>, written before its row: `truncated` says so and
-- names the file; `sha256` is the digest of the whole message. NULL: the row is whole.
ALTER TABLE messages ADD COLUMN truncated TEXT;
