// Self-checking testbench for fifo: fill to full, refuse a fifth write, drain in order,
// refuse a read when empty, then interleave writes and reads.
`timescale 1ns/1ps
module tb;
    reg        clk = 1'b0;
    reg        rst = 1'b1;
    reg        wr_en = 1'b0;
    reg        rd_en = 1'b0;
    reg  [7:0] din = 8'h00;
    wire [7:0] dout;
    wire       full, empty;
    integer    errors = 0;
    integer    i;

    fifo dut (.clk(clk), .rst(rst), .wr_en(wr_en), .din(din), .rd_en(rd_en),
              .dout(dout), .full(full), .empty(empty));

    always #5 clk = ~clk;

    task check(input cond, input [8*40-1:0] what);
        begin
            if (!cond) begin
                $error("fifo check failed: %0s (full=%b empty=%b dout=%h)", what, full, empty, dout);
                errors = errors + 1;
            end
        end
    endtask

    initial begin
        @(negedge clk);
        rst = 1'b0;
        check(empty === 1'b1 && full === 1'b0, "empty after reset");
        for (i = 0; i < 4; i = i + 1) begin      // fill: A0 A1 A2 A3
            check(full === 1'b0, "not full before a write");
            wr_en = 1'b1;
            din = 8'hA0 + i;
            @(negedge clk);
        end
        check(full === 1'b1, "full after four writes");
        din = 8'hEE;                              // a fifth write is dropped
        @(negedge clk);
        wr_en = 1'b0;
        check(full === 1'b1, "still full");
        for (i = 0; i < 4; i = i + 1) begin      // drain in order
            check(empty === 1'b0, "not empty before a read");
            check(dout === 8'hA0 + i, "data in write order");
            rd_en = 1'b1;
            @(negedge clk);
        end
        check(empty === 1'b1, "empty after four reads");
        @(negedge clk);                           // a read while empty changes nothing
        rd_en = 1'b0;
        check(empty === 1'b1 && full === 1'b0, "still empty");
        wr_en = 1'b1;                             // write and read in the same cycle
        din = 8'h11;
        @(negedge clk);
        din = 8'h22;
        rd_en = 1'b1;
        check(dout === 8'h11, "first of the interleaved words");
        @(negedge clk);
        wr_en = 1'b0;
        check(dout === 8'h22, "second of the interleaved words");
        @(negedge clk);
        rd_en = 1'b0;
        check(empty === 1'b1, "empty at the end");
        if (errors != 0)
            $fatal(1, "fifo: %0d check(s) failed", errors);
        $display("fifo: all checks passed");
        $finish;
    end
endmodule
