"""Export and import: a tenant's or a user's memory read page by page into a portable file, and such a file loaded
into a deployment batch by batch (the consolidator answers both requests)."""
from shared.transfer.entries import exported_entry, stored_entry
from shared.transfer.exporting import export_page
from shared.transfer.importing import Importing, import_batch, import_leased

__all__ = ["Importing", "export_page", "exported_entry", "import_batch", "import_leased",
           "stored_entry"]
