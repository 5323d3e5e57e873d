// Self-checking testbench for fsm: drives a bit sequence with single, overlapping and
// near-miss patterns and compares `found` with the last four inputs after every edge.
`timescale 1ns/1ps
module tb;
    reg        clk = 1'b0;
    reg        rst = 1'b1;
    reg        din = 1'b0;
    wire       found;
    reg  [3:0] history = 4'b0000;
    integer    count = 0;
    integer    errors = 0;
    integer    hits = 0;
    integer    i;
    // 1011 once, then 1011011 (two overlapping hits), then near misses 1010 and 10011.
    reg [0:23] bits = 24'b1011_0_1011011_0_1010_10011;

    fsm dut (.clk(clk), .rst(rst), .din(din), .found(found));

    always #5 clk = ~clk;

    initial begin
        @(negedge clk);
        rst = 1'b0;
        if (found !== 1'b0) begin
            $error("found=%b after reset", found);
            errors = errors + 1;
        end
        for (i = 0; i < 24; i = i + 1) begin
            din = bits[i];
            @(negedge clk);
            history = {history[2:0], bits[i]};
            count = count + 1;
            if (found !== (count >= 4 && history == 4'b1011)) begin
                $error("after input %0d (last four %b): found=%b", i, history, found);
                errors = errors + 1;
            end
            if (found === 1'b1)
                hits = hits + 1;
        end
        if (hits != 3) begin
            $error("found %0d hits, expected 3", hits);
            errors = errors + 1;
        end
        if (errors != 0)
            $fatal(1, "fsm: %0d check(s) failed", errors);
        $display("fsm: all checks passed");
        $finish;
    end
endmodule
