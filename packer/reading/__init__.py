"""Reading packs: manifest view, batch reads, epoch orders, NumPy batches, worker pipelines."""
