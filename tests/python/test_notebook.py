"""examples/notebooks/quickstart.ipynb runs headless (Debian's nbclient) against a real hpod; any
failing cell fails the test. The live table and the plots must be in the outputs."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import nbclient
import nbformat

BIN = os.environ["HPO_BIN"]
SRC = os.environ["HPO_SRC"]


class NotebookTest(unittest.TestCase):
    def test_quickstart_notebook(self):
        data = tempfile.mkdtemp(prefix="hpo-nb-")
        os.environ["HPO_DATA_DIR"] = data
        os.environ["PATH"] = BIN + os.pathsep + os.environ["PATH"]
        subprocess.run([os.path.join(BIN, "hpo"), "daemon", "start", "--cpus", "4"], check=True,
                       stdout=subprocess.DEVNULL)
        try:
            path = os.path.join(SRC, "examples", "notebooks", "quickstart.ipynb")
            nb = nbformat.read(path, as_version=4)
            client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                             resources={"metadata": {"path": os.path.dirname(path)}})
            client.execute()  # raises CellExecutionError when a cell fails
            outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
            html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
            # The final live table: every trial completed, or was stopped early by the
            # default early stopping (auto) at a rung that predicts.
            counts = re.search(r"\| COMPLETED (\d+)(?:  STOPPED (\d+))? \|", html)
            self.assertIsNotNone(counts, html[:300])
            self.assertEqual(int(counts.group(1)) + int(counts.group(2) or 0), 20)
            self.assertIn("<table", html)
            pngs = [o for o in outputs if "image/png" in o.get("data", {})]
            self.assertEqual(len(pngs), 3)
        finally:
            subprocess.run([os.path.join(BIN, "hpo"), "daemon", "stop"], stdout=subprocess.DEVNULL)
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
